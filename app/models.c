/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The models' lifecycle: each configured model gets its engine (app_engine_for, the one place that
 * reads what kind a model is), which loads it; then its in-flight limiter and its registration, so
 * that the dataplane can find it. Start-up stops at the first model that fails, with one line naming
 * it, and frees what was made: the daemon never starts half-configured. Reloading a model will go
 * here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <rte_malloc.h>
#include <rte_telemetry.h>

#include "defs.h"
#include "inject.h"

struct app_service *app_current;

const struct app_engine *const app_engines[] = {&app_engine_echo, &app_engine_cpu, &app_engine_gpu};
const unsigned int app_nb_engines = RTE_DIM(app_engines);

const struct app_engine *app_engine_for(const struct app_model_config *mc)
{
	if (app_model_is_echo(mc))
		return &app_engine_echo;
	return mc->device == APP_DEVICE_GPU ? &app_engine_gpu : &app_engine_cpu;
}

void app_failure_log(const struct app_model *m, struct app_exec_stats *st, bool per_lcore, const char *msg)
{
	uint64_t held;

	if (!plat_log_gate_pass(&st->fail_log, plat_tsc_now(), plat_us_to_tsc(APP_FAIL_LOG_US), &held))
		return;
	/* on the lcore that saw the failure: handed to the control thread, which writes it */
	PLAT_LOG_DEFERRED(WARNING, app, "model '%s': batch failed (%" PRIu64 " so far%s, %" PRIu64 " not logged since the "
		 "last line): %s", m->spec.name, st->batches_failed, per_lcore ? " on this lcore" : "", held, msg);
}

static void batching_to_spec(struct rt_model *spec, const struct bat_options *o)
{
	spec->priority_levels = o->priority_levels;
	spec->max_batch_size = o->max_batch_size;
	spec->num_batch_sizes = (uint16_t)RTE_MIN(o->num_allowed_batch_sizes, RT_BATCH_SIZES_MAX);
	for (uint16_t i = 0; i < spec->num_batch_sizes; i++)
		spec->batch_sizes[i] = o->allowed_batch_sizes[i];
}

static void model_free(struct app_model *m)
{
	if (m == NULL)
		return;
	if (m->engine->model_free != NULL)
		m->engine->model_free(m);
	rte_lpm_free(m->allow);
	bat_limiter_destroy(m->limiter);
	rte_free(m);
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
	m->engine = app_engine_for(mc);
	m->spec.id = id;
	ret = m->engine->model_create(m, err);
	if (ret == 0) {
		batching_to_spec(&m->spec, &mc->batching);
		m->limiter = bat_limiter_create(&mc->batching);
		ret = m->limiter != NULL ? 0 : -ENOMEM;
		if (ret != 0)
			fprintf(err, "batchwire: model '%s': out of memory for its in-flight limiter\n", mc->name);
	}
	if (ret == 0) {
		char name[RTE_MEMZONE_NAMESIZE];

		snprintf(name, sizeof(name), "bw_allow_m%u", id);
		ret = dp_allow_create(&mc->allow, name, SOCKET_ID_ANY, &m->allow);
		if (ret != 0)
			fprintf(err, "batchwire: model '%s': cannot build its allowlist: %s\n", mc->name,
				rte_strerror(-ret));
	}
	if (ret == 0) {
		ret = rt_registry_add(&svc->registry, &m->spec);
		if (ret != 0)
			fprintf(err, "batchwire: model '%s': cannot be registered: %s\n", mc->name, strerror(-ret));
	}
	if (ret != 0) {
		model_free(m);
		return ret;
	}
	svc->models[svc->nb_models++] = m;
	return 0;
}

int app_service_init(struct app_service *svc, struct app_config *cfg, FILE *err)
{
	int ret = 0;

	memset(svc, 0, sizeof(*svc));
	for (unsigned int e = 0; e < app_nb_engines && ret == 0; e++) {
		if (app_engines[e]->init != NULL)
			ret = app_engines[e]->init(cfg, err);
	}
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
	svc->ops = app_model_ops(svc);
	app_current = svc;
	return 0;
}

void app_service_fini(struct app_service *svc)
{
	app_lcores_stop();
	for (unsigned int i = 0; i < svc->nb_models; i++)
		model_free(svc->models[i]);
	svc->nb_models = 0;
	for (unsigned int e = 0; e < app_nb_engines; e++) {
		if (app_engines[e]->fini != NULL)
			app_engines[e]->fini();
	}
	app_inject_fini(); /* after the GPU let go of its memory */
	/* The registry and the ops point at the models just freed. */
	memset(&svc->registry, 0, sizeof(svc->registry));
	memset(&svc->ops, 0, sizeof(svc->ops));
	if (app_current == svc)
		app_current = NULL;
}

int app_service_memory_register(struct rte_mempool *const *pools, unsigned int nb_pools, FILE *err)
{
	for (unsigned int e = 0; e < app_nb_engines; e++) {
		int ret = app_engines[e]->memory_register != NULL ? app_engines[e]->memory_register(pools, nb_pools, err)
								   : 0;

		if (ret != 0)
			return ret;
	}
	return 0;
}
