/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The service's telemetry, on the telemetry thread: the batchers' counters summed over the polling
 * lcores (into /batchwire/stats, and per model), and each model's executor keys, from its engine and
 * summed over its channels' executor instances. Counters are plain integers their one writer updates;
 * a read may be a little behind, never torn (64-bit aligned stores).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <rte_telemetry.h>

#include "defs.h"

#define TEL_SUM_KEYS_MAX 32 /* distinct counter names one model's executors report */

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
		const struct app_lcore *al = &app_lcores[l];
		unsigned int nb = __atomic_load_n(&al->nb_channels, __ATOMIC_ACQUIRE);

		for (unsigned int c = 0; c < nb; c++) {
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
		rte_tel_data_add_array_string(d, app_current->models[i]->spec.name);
	return 0;
}

static int model_cb(const char *cmd __rte_unused, const char *params, struct rte_tel_data *d)
{
	const struct rt_model *spec;
	struct app_model *m;
	struct bat_stats sum;

	if (params == NULL || app_current == NULL)
		return -EINVAL;
	spec = rt_registry_find_name(&app_current->registry, params, (uint32_t)strlen(params));
	if (spec == NULL)
		return -EINVAL;
	m = app_current->models[spec->id];
	stats_sum((int)spec->id, &sum);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "id", spec->id);
	rte_tel_data_add_dict_string(d, "kind", m->engine->kind);
	rte_tel_data_add_dict_string(d, "device", m->engine->device);
	batch_keys_add(d, &sum, "");
	rte_tel_data_add_dict_u64(d, "inflight", bat_limiter_in_flight(m->limiter));
	rte_tel_data_add_dict_u64(d, "inflight_limit_milli", (uint64_t)(bat_limiter_limit(m->limiter) * 1000));
	m->engine->model_telemetry(m, d);
	if (m->engine->exec_stats != NULL) {
		struct app_exec_stats exec = {0};

		m->engine->exec_stats(m, &exec);
		exec_keys_add(d, &exec);
	}
	channel_stats_add(m, d);
	return 0;
}

int app_service_telemetry_register(void)
{
	int ret = rte_telemetry_register_cmd("/batchwire/models", models_cb, "Names of the models served. No parameters.");

	if (ret == 0)
		ret = rte_telemetry_register_cmd("/batchwire/model", model_cb,
						 "One model's counters: requests, batches by size, padding, window and queue "
						 "wait, compute time. Parameter: the model's name.");
	for (unsigned int e = 0; e < app_nb_engines && ret == 0; e++) {
		if (app_engines[e]->telemetry_register != NULL)
			ret = app_engines[e]->telemetry_register();
	}
	return ret;
}
