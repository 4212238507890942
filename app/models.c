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

/* Version pick of m's source, or (pick 0) the one its policy selects. */
static int version_pick(const struct app_model *m, uint32_t pick, uint32_t *version, char *file, size_t file_cap,
			char *why, size_t why_cap)
{
	return app_version_resolve(m->source, pick != 0 ? pick : m->cfg.version_specific, version, file, file_cap, why,
				   why_cap);
}

/* One model (pick 0: the version its policy selects; else version pick, a member of a set of versions
 * served at once, registered only as the set's first). */
static int model_create(struct app_service *svc, struct app_model_config *mc, uint32_t id, uint32_t pick,
			bool registered, FILE *err)
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
		ret = version_pick(m, pick, &m->version, m->cfg.path, sizeof(m->cfg.path), why, sizeof(why));
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
	if (ret == 0 && registered) {
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

/*
 * version_policy = latest N: the N highest versions of the directory, a model each, the highest first
 * (registered under the name), with the same tensors (a request is checked against the registered
 * one's when it names no version).
 */
static int versions_create(struct app_service *svc, struct app_model_config *mc, FILE *err)
{
	uint32_t versions[APP_VERSIONS_MAX];
	int n = app_versions_list(mc->path, versions, APP_VERSIONS_MAX);
	struct app_versions_served *vs;
	struct app_model *head;
	char why[256];
	int ret;

	if (n < 0) {
		fprintf(err, "batchwire: model '%s': cannot read %s: %s\n", mc->name, mc->path, strerror(-n));
		return n;
	}
	if ((unsigned int)n < mc->version_latest) {
		fprintf(err, "batchwire: model '%s': version_policy latest %u serves %u versions at once, but %s holds %d "
			"(expected a directory of versions N/model.onnx)\n", mc->name, mc->version_latest,
			mc->version_latest, mc->path, n);
		return -ENOENT;
	}
	head = NULL;
	for (unsigned int k = 0; k < mc->version_latest; k++) {
		uint32_t id = svc->nb_models;

		ret = model_create(svc, mc, id, versions[n - 1 - (int)k], k == 0, err);
		if (ret != 0)
			return ret;
		if (k == 0) {
			head = svc->models[id];
			continue;
		}
		ret = app_model_signature_check(&head->spec, &svc->models[id]->spec, why, sizeof(why));
		if (ret != 0) {
			fprintf(err, "batchwire: model '%s': version %u is %s\n", mc->name, svc->models[id]->version, why);
			return ret;
		}
	}
	vs = &head->versions_set;
	for (unsigned int k = 0; k < mc->version_latest; k++) {
		vs->member[k] = svc->models[head->spec.id + k];
		vs->member[k]->served = vs;
	}
	vs->nb = mc->version_latest;
	vs->latest = 0;
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
			if (app_model_is_echo(&cfg->models[i]) != (pass == 0))
				continue;
			if (cfg->models[i].version_latest > 1)
				ret = versions_create(svc, &cfg->models[i], err);
			else
				ret = model_create(svc, &cfg->models[i], svc->nb_models, 0, true, err);
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

/* One model, under the lock: the version its policy selects now (pick 0) or version pick, loaded
 * beside the served one (the served file too, which may have been rewritten in place). */
static int model_reload(struct app_model *m, uint32_t pick, char *line, size_t cap)
{
	char file[APP_PATH_MAX], why[APP_PATH_MAX + RT_ERR_MAX * 2];
	uint32_t version, before = m->version;
	int ret;

	if (m->engine->model_reload == NULL) {
		snprintf(line, cap, "model '%s': not reloaded: %s", m->spec.name,
			 app_model_is_echo(&m->cfg) ? "the built-in echo model has no versions"
						    : "its engine cannot reload a model; restart to change it");
		return -ENOTSUP;
	}
	ret = version_pick(m, pick, &version, file, sizeof(file), why, sizeof(why));
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

static bool version_in(uint32_t v, const uint32_t *set, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

/*
 * A set of versions served at once (latest N), under the lock: the N highest of the directory now.
 * A member whose version is still among them reloads it; the others move to the highest ones not
 * served yet, the oldest member first. With fewer versions left than members, a member whose
 * version left keeps serving it. Then unversioned requests go to the highest.
 */
static int versions_reload(struct app_model *head, char *out, size_t cap, size_t *off)
{
	struct app_versions_served *vs = head->served;
	uint32_t avail[APP_VERSIONS_MAX], want[APP_VERSIONS_SERVED_MAX], pick[APP_VERSIONS_SERVED_MAX] = {0};
	char line[APP_PATH_MAX + RT_ERR_MAX * 2 + 128];
	unsigned int nw = 0, best = 0, order[APP_VERSIONS_SERVED_MAX];
	int n = app_versions_list(head->source, avail, APP_VERSIONS_MAX), ret = 0;

	if (n < 0) {
		char served[64];

		app_model_versions_format(head, served, sizeof(served));
		snprintf(line, sizeof(line), "model '%s': versions %s still serve; the reload failed: cannot read %s: %s",
			 head->spec.name, served, head->source, strerror(-n));
		PLAT_LOG(ERR, app, "%s", line);
		for (unsigned int i = 0; i < vs->nb; i++) {
			vs->member[i]->reload_failures++;
			snprintf(vs->member[i]->reload_last, sizeof(vs->member[i]->reload_last), "%.*s",
				 (int)sizeof(vs->member[i]->reload_last) - 1, line);
		}
		*off = out_line(out, cap, *off, line);
		return n;
	}
	for (int i = n - 1; i >= 0 && nw < vs->nb; i--)
		want[nw++] = avail[i];
	/* the members, oldest version first: the first to move */
	for (unsigned int i = 0; i < vs->nb; i++) {
		unsigned int j = i;

		while (j > 0 && vs->member[order[j - 1]]->version > vs->member[i]->version) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	for (unsigned int i = 0; i < vs->nb; i++)
		if (version_in(vs->member[i]->version, want, nw))
			pick[i] = vs->member[i]->version;
	for (unsigned int k = 0, w = 0; k < vs->nb; k++) {
		unsigned int i = order[k];

		if (pick[i] != 0)
			continue;
		while (w < nw && version_in(want[w], pick, vs->nb))
			w++;
		if (w < nw) {
			pick[i] = want[w++];
		} else {
			/* nothing left to move to: it serves on, as it is */
			snprintf(line, sizeof(line), "model '%s': version %u serves on: %s holds fewer than %u versions now",
				 head->spec.name, vs->member[i]->version, head->source, vs->nb);
			PLAT_LOG(WARNING, app, "%s", line);
			*off = out_line(out, cap, *off, line);
		}
	}
	for (unsigned int i = 0; i < vs->nb; i++) {
		int r;

		if (pick[i] == 0)
			continue;
		r = model_reload(vs->member[i], pick[i], line, sizeof(line));
		*off = out_line(out, cap, *off, line);
		ret = ret != 0 ? ret : r;
	}
	for (unsigned int i = 1; i < vs->nb; i++) {
		if (vs->member[i]->version > vs->member[best]->version)
			best = i;
	}
	__atomic_store_n(&vs->latest, best, __ATOMIC_RELEASE);
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

		if (!app_model_is_named(m) ||
		    (name != NULL ? strcmp(m->spec.name, name) != 0 : m->engine->model_reload == NULL))
			continue;
		found++;
		if (m->served != NULL && m->engine->model_reload != NULL) {
			r = versions_reload(m, out, cap, &off);
		} else {
			r = model_reload(m, 0, line, sizeof(line));
			off = out_line(out, cap, off, line);
		}
		ret = ret != 0 ? ret : r;
	}
	pthread_mutex_unlock(&app_reload_mutex);
	if (found == 0 && name != NULL) {
		snprintf(line, sizeof(line), "no model named '%s'", name);
		out_line(out, cap, off, line);
		return -ENOENT;
	}
	if (found == 0)
		out_line(out, cap, off, "no model to reload (only the built-in echo model is configured)");
	return ret;
}
