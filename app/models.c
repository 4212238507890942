/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The models' lifecycle: each configured model gets its engine (app_engine_for, the one place that
 * reads what kind a model is), which loads it; then its in-flight limiter and its registration, so
 * that the dataplane can find it. Start-up stops at the first model that fails, with one line naming
 * it, and frees what was made: the daemon never starts half-configured. A reload (app_models_reload)
 * has the engine make the version the policy selects now beside the served one.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_telemetry.h>

#include "defs.h"
#include "graph.h"
#include "inject.h"

struct app_service *app_current;
static bool g_reloads_stopped; /* app_reloads_stop: from the stop signal on */

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
	ret = 0;
	if (!app_model_is_echo(mc)) {
		char why[APP_PATH_MAX + 160];

		snprintf(m->source, sizeof(m->source), "%s", mc->path);
		ret = app_version_resolve(mc, m->source, &m->version, m->cfg.path, sizeof(m->cfg.path), why, sizeof(why));
		if (ret != 0)
			fprintf(err, "batchwire: model '%s': %s\n", mc->name, why);
	}
	if (ret == 0)
		ret = m->engine->model_create(m, err);
	m->spec.version = m->version;
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
	__atomic_store_n(&g_reloads_stopped, false, __ATOMIC_RELEASE); /* a service before this one stopped them */
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
	/* a reload still running gives up (app_reloads_stopping) before the models go */
	app_reloads_stop();
	pthread_mutex_lock(&app_reload_mutex);
	pthread_mutex_unlock(&app_reload_mutex);
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

/* ---- reloads ------------------------------------------------------------------------------------- */

pthread_mutex_t app_reload_mutex = PTHREAD_MUTEX_INITIALIZER;

void app_reloads_stop(void)
{
	__atomic_store_n(&g_reloads_stopped, true, __ATOMIC_RELEASE);
}

bool app_reloads_stopping(void)
{
	return __atomic_load_n(&g_reloads_stopped, __ATOMIC_ACQUIRE);
}

static size_t out_line(char *out, size_t cap, size_t off, const char *line)
{
	if (off < cap)
		off += (size_t)snprintf(out + off, cap - off, "%s\n", line);
	return off;
}

/* One model, under the lock: the version its policy selects now, loaded beside the served one (the
 * served file too, which may have been rewritten in place). */
static int model_reload(struct app_model *m, char *line, size_t cap)
{
	char file[APP_PATH_MAX], why[APP_PATH_MAX + RT_ERR_MAX * 2];
	uint32_t version, before = m->version;
	int ret;

	if (m->engine->model_reload == NULL) {
		snprintf(line, cap, "model '%s': not reloaded: %s", m->spec.name,
			 app_model_is_echo(&m->cfg) ? "the built-in echo model has no versions"
						    : "a device = gpu model cannot be reloaded yet; restart to change it");
		return -ENOTSUP;
	}
	ret = app_version_resolve(&m->cfg, m->source, &version, file, sizeof(file), why, sizeof(why));
	if (ret == 0 && version == m->version && strcmp(file, m->cfg.path) == 0) {
		/* the same file again: it may have been rewritten in place, so it is loaded again all the same */
		PLAT_LOG(INFO, app, "model '%s': reloading version %u from %s", m->spec.name, version, file);
	} else if (ret == 0) {
		PLAT_LOG(INFO, app, "model '%s': loading version %u from %s beside version %u", m->spec.name, version, file,
			 m->version);
	}
	if (ret == 0)
		ret = m->engine->model_reload(m, file, version, why, sizeof(why));
	if (ret != 0) {
		m->reload_failures++;
		if (snprintf(line, cap, "model '%s': version %u still serves; the reload failed: %s", m->spec.name, before,
			     why) >= (int)cap)
			line[cap - 1] = '\0';
		PLAT_LOG(ERR, app, "%s", line);
	} else {
		m->reloads++;
		snprintf(m->cfg.path, sizeof(m->cfg.path), "%s", file);
		if (snprintf(line, cap, "model '%s': version %u serves (from %s; version %u before)%s%s", m->spec.name,
			     version, file, before, why[0] != '\0' ? "; " : "", why) >= (int)cap)
			line[cap - 1] = '\0'; /* cut: the log has it whole enough */
		PLAT_LOG(INFO, app, "%s", line);
	}
	snprintf(m->reload_last, sizeof(m->reload_last), "%.*s", (int)sizeof(m->reload_last) - 1, line);
	return ret;
}

struct reload_args {
	const char *name;
	char *out;
	size_t cap;
	int ret;
};

static int models_reload(const char *name, char *out, size_t cap);

/*
 * A reload's work (reading, optimising, planning, packing and with chunk_rows = auto timing a model:
 * seconds of CPU) runs on a control thread of its own at a lower priority: where the control
 * threads share a CPU with a worker lcore (a small host, the main lcore as the worker), the lcore
 * keeps that CPU and the reload takes longer instead. The caller waits for it.
 */
#define APP_RELOAD_NICE 10

static void *reload_thread(void *arg)
{
	struct reload_args *a = arg;

	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), APP_RELOAD_NICE) != 0)
		PLAT_LOG(WARNING, app, "reload: cannot lower its thread's priority: %s", strerror(errno));
	a->ret = models_reload(a->name, a->out, a->cap);
	return NULL;
}

int app_models_reload(const char *name, char *out, size_t cap)
{
	struct reload_args a = { .name = name, .out = out, .cap = cap };
	pthread_t t;
	int ret = rte_ctrl_thread_create(&t, "bw-reload", NULL, reload_thread, &a);

	if (ret != 0) {
		snprintf(out, cap, "not reloaded: cannot start the reload thread: %s\n", strerror(-ret));
		return ret;
	}
	pthread_join(t, NULL);
	return a.ret;
}

static int models_reload(const char *name, char *out, size_t cap)
{
	struct app_service *svc = app_current;
	char line[APP_PATH_MAX + RT_ERR_MAX * 2 + 128];
	size_t off = 0;
	int ret = 0, found = 0;

	if (cap > 0)
		out[0] = '\0';
	pthread_mutex_lock(&app_reload_mutex);
	if (app_reloads_stopping()) {
		pthread_mutex_unlock(&app_reload_mutex);
		out_line(out, cap, 0, "not reloaded: the server is stopping");
		return -ESHUTDOWN;
	}
	for (unsigned int i = 0; svc != NULL && i < svc->nb_models; i++) {
		struct app_model *m = svc->models[i];
		int r;

		if (name != NULL ? strcmp(m->spec.name, name) != 0 : m->engine->model_reload == NULL)
			continue;
		found++;
		r = model_reload(m, line, sizeof(line));
		off = out_line(out, cap, off, line);
		ret = ret != 0 ? ret : r;
	}
	pthread_mutex_unlock(&app_reload_mutex);
	if (found == 0 && name != NULL) {
		snprintf(line, sizeof(line), "no model named '%s'", name);
		out_line(out, cap, off, line);
		return -ENOENT;
	}
	if (found == 0)
		out_line(out, cap, off, "no model to reload (only echo and device = gpu models are configured)");
	return ret;
}
