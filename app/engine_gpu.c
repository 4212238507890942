/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ONNX models on a GPU: no workers. The graph is compiled into a device program once (one op list
 * per allowed batch size) and loaded on the device; each polling lcore makes its own GPU executor
 * (arenas, batch tables, one CUDA graph per size, captured on a stream of that lcore and model's own)
 * on its own thread, and launches a closed batch where it was batched, at once. It sees the batch
 * finish by reading a completion word the GPU writes into mapped host memory. The device reads requests from and writes
 * replies into the mbuf pools, registered with it before the port starts.
 *
 * Health: a lost CUDA context fails no call until one is made, so a failed launch, or launches in
 * flight with none finishing for GPU_HEALTH_CHECK_US, has the device asked. The first lcore to see it
 * lost marks it so: its models answer UNAVAILABLE from then on, and each lcore fails its own batches
 * in flight.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_telemetry.h>

#include "defs.h"
#include "graph.h"
#include "host.h"

/* GPU batches in flight this long with none finishing: ask the device whether it is still there.
 * Only then: the question is not free. */
#define GPU_HEALTH_CHECK_US 100000
#define GPU_OLD_KEEP_US 50000 /* beside twice batch_timeout_micros: a replaced version kept after the routing moved */

/*
 * The device the models with device = gpu run on, opened at init before any lcore runs; hd.ops NULL
 * when no model does.
 */
struct gpu_service {
	struct gpu_host_device hd;
	unsigned int nb_regions;
	void *regions[GPU_REGIONS_MAX]; /* host memory registered with it (the mbuf pools) */
	uint64_t registered_bytes;
	uint32_t lost;                  /* 0 healthy, 1 being marked, 2 lost (lost_why written) */
	char lost_why[GPU_ERR_MAX];
};

/* A model's GPU side (app_model.priv): the serving version's program, compiled and loaded once. */
struct gpu_model {
	struct gpu_host_program prog;
	struct rt_model *graph_spec;    /* a reloaded version's graph, which its compiled program names
					 * nodes from; NULL: the first version's, in app_model.spec */
	struct gpu_model *before;       /* the version before, until every lcore let go of it */
};

/* An executor and its stream: a version's on one lcore. A reload hands the new one to the lcore in
 * it, and the lcore hands the old one back in it once its launches are done. */
struct gpu_swap {
	struct gpu_executor *gpu;
	struct gpu_stream *stream;
	uint32_t version;               /* the model version its program is */
};

/* A model on one polling lcore (the channel's executor instance): written by that lcore only, but
 * for the hand-overs of a reload (pending, retired). */
struct gpu_channel {
	struct app_model *model;
	struct app_lcore *lcore;
	struct gpu_executor *gpu;       /* made on the lcore's own thread (gpu_lcore_start), or by a reload */
	struct gpu_stream *stream;      /* this (lcore, model)'s own: a long batch of another model on
					 * the lcore does not hold this one's behind it */
	uint32_t version;               /* the model version gpu runs */
	uint64_t drain_until_tsc;       /* draining: kept at least until then (0: the routing has not moved yet) */
	struct gpu_swap *pending;       /* a reload's new version, for the lcore to take between batches */
	struct gpu_swap *draining;      /* the version before, finishing its launches (the lcore's) */
	struct gpu_swap *retired;       /* that one once done, for the reload to free */
	struct gpu_executor_stats freed; /* counters of the executors freed since start-up */
	struct app_exec_stats stats;
	uint64_t progress_tsc;          /* last completion, or last health check */
	uint64_t health_checks;
};

/* Telemetry reads channels' executors and programs; a reload frees them under it. */
static pthread_mutex_t g_gpu_tel_lock = PTHREAD_MUTEX_INITIALIZER;

static struct gpu_service g_gpu;

static struct gpu_model *gpu_of(const struct app_model *m)
{
	return m->priv;
}

/* ---- health ------------------------------------------------------------------------------------- */

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

static int gpu_health(const void *ctx __rte_unused, char *why, size_t cap)
{
	if (likely(!gpu_lost()))
		return 0;
	snprintf(why, cap, "its GPU is unhealthy (%s)", gpu_lost_why());
	return -ENODEV;
}

/* ---- the polling lcore's executor --------------------------------------------------------------- */

/*
 * (hot) A batch on the GPU starts where it was batched, at once: the batch table written and one
 * graph launched. A launch that fails completes its batch with INTERNAL (from the completion poller)
 * and has the device asked whether it is lost.
 */
/*
 * (hot path, once per reload) A new version published: batches launched from here on go to its
 * executor; the old one finishes what it has in flight (gpu_poll), then goes back to the reload.
 */
static void gpu_swap_take(struct gpu_channel *gc)
{
	struct gpu_swap *next = __atomic_load_n(&gc->pending, __ATOMIC_ACQUIRE), was = { gc->gpu, gc->stream, gc->version };

	if (gc->draining != NULL)
		return; /* the reload waits for the one before to be retired: never here */
	gc->gpu = next->gpu;
	gc->stream = next->stream;
	gc->version = next->version;
	*next = was;
	gc->draining = next;
	__atomic_store_n(&gc->pending, NULL, __ATOMIC_RELEASE);
}

static int gpu_submit(void *ctx, struct bw_batch *batch)
{
	struct gpu_channel *gc = ctx;
	struct app_exec_stats *st = &gc->stats;
	struct gpu_executor *ex;
	const char *why;
	int rc;

	if (unlikely(__atomic_load_n(&gc->pending, __ATOMIC_RELAXED) != NULL))
		gpu_swap_take(gc);
	if (unlikely(gpu_lost()))
		return -ENODEV; /* UNAVAILABLE, as the model now is */
	batch->started_tsc = plat_tsc_now();
	if (likely(batch->version == gc->version))
		rc = gpu_executor_submit(ex = gc->gpu, batch);
	else if (gc->draining != NULL && gc->draining->version == batch->version)
		rc = gpu_executor_submit(ex = gc->draining->gpu, batch); /* admitted before the switch */
	else if (!batch->version_pinned)
		rc = gpu_executor_submit(ex = gc->gpu, batch); /* its version gone: none named, the one serving */
	else {
		/* a request named a version no longer loaded here: never run on another (its reply names it) */
		st->batches_started++;
		st->batches_done++;
		st->batches_failed++;
		return app_deferred_push(gc->lcore, batch, BW_STATUS_UNAVAILABLE);
	}
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
	why = rc == -EIO ? gpu_executor_error(ex) :
	      rc == -EFAULT ? "a request's memory is not registered with the GPU" :
	      "the GPU executor has no graph for the batch's size";
	app_failure_log(gc->model, st, true, why);
	if (rc == -EIO)
		gpu_health_check();
	return app_deferred_push(gc->lcore, batch, BW_STATUS_INTERNAL);
}

/* What poll hands on: the lcore's done, after this channel's own counting. */
struct gpu_poll_ctx {
	struct gpu_channel *gc;
	bw_completion_fn done;
	void *arg;
};

static void gpu_batch_done(void *ctx, const struct bw_completion *c)
{
	struct gpu_poll_ctx *p = ctx;
	struct app_exec_stats *st = &p->gc->stats;
	uint64_t now = p->gc->lcore->now_tsc;
	struct bw_batch *b = c->batch;

	st->batches_done++;
	st->compute_us += now > b->started_tsc ? plat_tsc_to_us(now - b->started_tsc) : 0;
	if (c->status != BW_STATUS_OK) {
		st->batches_failed++;
		app_failure_log(p->gc->model, st, true, c->msg);
	}
	p->done(p->arg, c);
}

/* Launches in flight and none finishing for GPU_HEALTH_CHECK_US: is the device still there? */
static void gpu_stall_check(struct gpu_channel *gc, unsigned int completed)
{
	uint64_t now = gc->lcore->now_tsc;

	if (completed != 0 || gpu_executor_in_flight(gc->gpu) == 0 || gpu_lost()) {
		gc->progress_tsc = now;
		return;
	}
	if (now - gc->progress_tsc < plat_us_to_tsc(GPU_HEALTH_CHECK_US))
		return;
	gc->progress_tsc = now;
	gc->health_checks++;
	gpu_health_check();
}

/*
 * (hot) The version before a reload: its last launches, then back to the reload once none is left
 * and no request admitted to it can still come: requests are admitted to the version the model
 * routes to, which the reload moves once every lcore has switched; batches of the old one opened
 * before that are kept for twice batch_timeout_micros and GPU_OLD_KEEP_US more.
 */
static unsigned int gpu_drain_poll(struct gpu_channel *gc, struct gpu_poll_ctx *p, unsigned int max)
{
	struct gpu_executor *old = gc->draining->gpu;
	uint64_t now = gc->lcore->now_tsc;
	unsigned int n = 0;

	if (gpu_executor_in_flight(old) > 0)
		n = unlikely(gpu_lost()) ? gpu_executor_fail_all(old, gpu_batch_done, p, "the GPU is unhealthy: the "
								 "batch's launch will never finish")
					 : gpu_executor_poll(old, gpu_batch_done, p, max);
	if (gc->drain_until_tsc == 0 && __atomic_load_n(&gc->model->version, __ATOMIC_ACQUIRE) == gc->version)
		gc->drain_until_tsc = now + plat_us_to_tsc(2ull * gc->model->cfg.batching.batch_timeout_micros +
							   GPU_OLD_KEEP_US);
	if (gpu_executor_in_flight(old) == 0 && gc->drain_until_tsc != 0 && now >= gc->drain_until_tsc) {
		gc->drain_until_tsc = 0;
		__atomic_store_n(&gc->retired, gc->draining, __ATOMIC_RELEASE);
		gc->draining = NULL;
	}
	return n;
}

/* (hot) This lcore's finished launches of one model; all of them at once when the device is lost. */
static unsigned int gpu_poll(void *ctx, bw_completion_fn done, void *arg, unsigned int max)
{
	struct gpu_channel *gc = ctx;
	struct gpu_poll_ctx p = {gc, done, arg};
	unsigned int n = 0;

	if (unlikely(__atomic_load_n(&gc->pending, __ATOMIC_RELAXED) != NULL))
		gpu_swap_take(gc);
	if (unlikely(gc->draining != NULL)) {
		n = gpu_drain_poll(gc, &p, max);
		if (n >= max)
			return n;
	}
	if (unlikely(gpu_lost()) && gpu_executor_in_flight(gc->gpu) > 0)
		return n + gpu_executor_fail_all(gc->gpu, gpu_batch_done, &p,
						 "the GPU is unhealthy: the batch's launch will never finish");
	n += gpu_executor_poll(gc->gpu, gpu_batch_done, &p, max - n);
	gpu_stall_check(gc, n);
	return n;
}

/*
 * On the polling lcore's own thread, before its poll loop: this model's stream on the lcore (one per
 * (lcore, model): a stream runs its work in order, so models sharing one would wait behind each
 * other's batches) and its executor (CUDA graphs are captured, thread-locally, on the stream of the
 * thread that will launch them).
 */
static int gpu_lcore_start(void *ctx, char *err, size_t cap)
{
	struct gpu_channel *gc = ctx;
	struct app_lcore *al = gc->lcore;
	struct app_model *m = gc->model;
	char why[GPU_ERR_MAX * 2];
	int ret;

	if (gc->gpu != NULL)
		return 0;
	if (gc->stream == NULL) {
		ret = g_gpu.hd.ops->stream_create(g_gpu.hd.dev, &gc->stream, why, sizeof(why));
		if (ret != 0) {
			gc->stream = NULL;
			snprintf(err, cap, "lcore %u: model '%s': a stream on GPU %d: %s", al->lcore_id, m->spec.name,
				 g_gpu.hd.index, why);
			return ret;
		}
	}
	gc->version = __atomic_load_n(&m->version, __ATOMIC_ACQUIRE);
	gc->gpu = gpu_executor_create(g_gpu.hd.ops, g_gpu.hd.dev, gpu_of(m)->prog.loaded, gpu_of(m)->prog.compiled,
				      gc->stream, m->cfg.slots, m->cfg.launch_mode, why, sizeof(why));
	if (gc->gpu == NULL) {
		ret = -errno;
		snprintf(err, cap, "lcore %u: model '%s' on GPU %d: %s", al->lcore_id, m->spec.name, g_gpu.hd.index, why);
		return ret;
	}
	gc->progress_tsc = plat_tsc_now();
	return 0;
}

/* An executor, then its stream (what was queued on it finishes first); its counters kept in freed. */
static void gpu_swap_free(struct gpu_swap *sw, struct gpu_executor_stats *freed)
{
	struct gpu_executor_stats gs = {0};

	if (sw->gpu != NULL) {
		gpu_executor_stats(sw->gpu, &gs);
		freed->launched += gs.launched;
		freed->completed += gs.completed;
		freed->faulted += gs.faulted;
		freed->launch_errors += gs.launch_errors;
		gpu_executor_destroy(sw->gpu);
	}
	if (sw->stream != NULL)
		g_gpu.hd.ops->stream_destroy(sw->stream);
	sw->gpu = NULL;
	sw->stream = NULL;
}

/* After the lcore stopped launching, on the main thread: the executor and its stream, and those of
 * a reload the server stopped in the middle of. */
static void gpu_lcore_stop(void *ctx)
{
	struct gpu_channel *gc = ctx;
	struct gpu_swap live = { gc->gpu, gc->stream, gc->version };
	struct gpu_swap *others[] = { gc->pending, gc->draining, gc->retired };

	pthread_mutex_lock(&g_gpu_tel_lock);
	gpu_swap_free(&live, &gc->freed);
	for (unsigned int i = 0; i < RTE_DIM(others); i++) {
		if (others[i] != NULL) {
			gpu_swap_free(others[i], &gc->freed);
			rte_free(others[i]);
		}
	}
	rte_free(gc);
	pthread_mutex_unlock(&g_gpu_tel_lock);
}

/* Telemetry's: under g_gpu_tel_lock (app_engine.model_telemetry and the channel stats) */
static void gpu_stats(const void *ctx, bw_stat_fn add, void *sink)
{
	const struct gpu_channel *gc = ctx;
	struct gpu_executor_stats gs = {0};

	pthread_mutex_lock(&g_gpu_tel_lock);
	if (gc->gpu == NULL) {
		pthread_mutex_unlock(&g_gpu_tel_lock);
		return;
	}
	gpu_executor_stats(gc->gpu, &gs);
	gs.launched += gc->freed.launched;
	gs.completed += gc->freed.completed;
	gs.faulted += gc->freed.faulted;
	gs.launch_errors += gc->freed.launch_errors;
	add(sink, "gpu_launched", gs.launched);
	add(sink, "gpu_completed", gs.completed);
	add(sink, "gpu_faulted", gs.faulted);
	add(sink, "gpu_launch_errors", gs.launch_errors);
	add(sink, "gpu_in_flight", gpu_executor_in_flight(gc->gpu));
	add(sink, "gpu_stall_health_checks", gc->health_checks);
	pthread_mutex_unlock(&g_gpu_tel_lock);
}

static const struct bw_executor_ops gpu_executor = {
	.name = "gpu",
	.lcore_start = gpu_lcore_start,
	.lcore_stop = gpu_lcore_stop,
	.submit = gpu_submit,
	.poll = gpu_poll,
	.health = gpu_health,
	.stats = gpu_stats,
};

static int gpu_channel_init(struct app_channel *ch, int socket)
{
	struct gpu_channel *gc = rte_zmalloc_socket("bw_gpu_channel", sizeof(*gc), RTE_CACHE_LINE_SIZE, socket);

	if (gc == NULL)
		return -ENOMEM;
	gc->model = ch->model;
	gc->lcore = ch->lcore;
	ch->executor.ctx = gc;
	return 0;
}

/* ---- the device ---------------------------------------------------------------------------------- */

static void *ctrl_cpus_read(void *arg)
{
	return (void *)(intptr_t)pthread_getaffinity_np(pthread_self(), sizeof(cpu_set_t), arg);
}

/*
 * The CPUs EAL gives its control threads (those the process started on minus the lcores', or the
 * main lcore's when none is left): DPDK 22.11 does not export that set, so one control thread reads
 * its own affinity. \return 0, or a negative errno.
 */
static int ctrl_cpus(cpu_set_t *cpus)
{
	pthread_t t;
	void *res = NULL;
	int ret = rte_ctrl_thread_create(&t, "bw-cpus", NULL, ctrl_cpus_read, cpus);

	if (ret != 0)
		return ret < 0 ? ret : -ret;
	ret = pthread_join(t, &res);
	return ret != 0 ? -ret : -(int)(intptr_t)res;
}

/*
 * Opens the device when a model runs on it: a host without one stops here, saying why. The CUDA
 * driver's helper threads, started by the probe and the context, go to the control threads' CPUs,
 * not the main lcore's (they would inherit this thread's).
 */
static int gpu_init(const struct app_config *cfg, FILE *err)
{
	const char *user = NULL, *module = cfg->gpu_module[0] != '\0' ? cfg->gpu_module : NULL;
	char why[GPU_ERR_MAX * 2];
	cpu_set_t driver_cpus;
	int ret;

	memset(&g_gpu, 0, sizeof(g_gpu));
	for (unsigned int i = 0; i < cfg->nb_models && user == NULL; i++)
		if (app_engine_for(&cfg->models[i]) == &app_engine_gpu)
			user = cfg->models[i].name;
	if (user == NULL)
		return 0;
	ret = gpu_kernels_register();
	if (ret == 0) {
		int cpus = ctrl_cpus(&driver_cpus);

		if (cpus != 0)
			PLAT_LOG(WARNING, app, "the control threads' CPUs unknown (%s): the GPU driver's threads stay "
				 "on the main lcore's", strerror(-cpus));
		ret = gpu_host_device_open_on(module, cfg->gpu_index, cpus == 0 ? &driver_cpus : NULL, &g_gpu.hd,
					      why, sizeof(why));
	} else
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

/* After every model is gone (their streams went with their channels): the registered memory, the device. */
static void gpu_fini(void)
{
	if (g_gpu.hd.ops == NULL)
		return;
	for (unsigned int r = 0; r < g_gpu.nb_regions; r++)
		g_gpu.hd.ops->host_unregister(g_gpu.hd.dev, g_gpu.regions[r], NULL, 0);
	gpu_host_device_close(&g_gpu.hd);
	memset(&g_gpu, 0, sizeof(g_gpu));
}

/* One version's program, and its graph when a reload loaded it (the first version's is m->spec's). */
static void gpu_version_free(struct gpu_model *gm)
{
	gpu_host_program_unload(&g_gpu.hd, &gm->prog);
	if (gm->graph_spec != NULL) {
		rt_model_fini(gm->graph_spec);
		rte_free(gm->graph_spec);
	}
	rte_free(gm);
}

static void gpu_model_free(struct app_model *m)
{
	struct gpu_model *gm = gpu_of(m);

	while (gm != NULL) {
		struct gpu_model *before = gm->before;

		gpu_version_free(gm);
		gm = before;
	}
	m->priv = NULL;
	rt_model_fini(&m->spec);
}

/*
 * Loads the graph as the file has it (the CPU's fused ops are CPU kernels), compiles it into a device
 * program (one op list per allowed size) and loads that on the device once.
 */
static int gpu_model_create(struct app_model *m, FILE *err)
{
	struct app_model_config *mc = &m->cfg;
	const struct bat_options *o = &mc->batching;
	int64_t sizes[BAT_ALLOWED_SIZES_MAX];
	char why[GPU_ERR_MAX * 2];
	struct gpu_model *gm;
	size_t arena = 0;
	int ret;

	ret = rt_onnx_model_load(&m->spec, m->spec.id, mc->name, mc->path, RT_DEVICE_GPU, NULL, NULL, why,
				 sizeof(why));
	if (ret != 0) {
		fprintf(err, "batchwire: model '%s' (%s): %s\n", mc->name, mc->path, why);
		return ret;
	}
	gm = rte_zmalloc("bw_gpu_model", sizeof(*gm), RTE_CACHE_LINE_SIZE);
	if (gm == NULL) {
		fprintf(err, "batchwire: model '%s': out of memory\n", mc->name);
		return -ENOMEM;
	}
	m->priv = gm;
	for (unsigned int i = 0; i < o->num_allowed_batch_sizes; i++)
		sizes[i] = o->allowed_batch_sizes[i];
	ret = gpu_host_program_load(&g_gpu.hd, m->spec.graph, sizes, o->num_allowed_batch_sizes,
				    &(struct gpu_compile_options){ mc->precision, mc->layout }, &gm->prog, why, sizeof(why));
	if (ret != 0) {
		fprintf(err, "batchwire: model '%s' (%s): on GPU %d: %s\n", mc->name, mc->path, g_gpu.hd.index, why);
		return ret;
	}
	/* a slot per batch the in-flight limit lets through: a dispatched batch always finds one */
	if (mc->slots == 0)
		mc->slots = app_model_inflight_max(mc);
	for (uint32_t i = 0; i < gm->prog.compiled->prog.nb_sizes; i++)
		arena += gm->prog.compiled->prog.sizes[i].arena_bytes;
	app_reply_layout(m);
	PLAT_LOG(INFO, app, "model '%s' (id %u) version %u from %s on GPU %d (%s), %s, %s, %s launch: %u inputs, %u "
		 "outputs, %u nodes, %u device ops at size %" PRId64 ", %u batch sizes up to %" PRId64 ", %u slots each per "
		 "polling lcore (%zu KiB of device arenas per lcore), %zu KiB of constants", m->spec.name, m->spec.id,
		 m->version, mc->path,
		 g_gpu.hd.index, g_gpu.hd.info.name, gpu_precision_name(mc->precision),
		 gpu_layout_name(gm->prog.compiled->layout), gpu_launch_mode_name(mc->launch_mode), m->spec.num_inputs,
		 m->spec.num_outputs, m->spec.graph->num_nodes,
		 gm->prog.compiled->prog.sizes[o->num_allowed_batch_sizes - 1].nb_ops,
		 sizes[o->num_allowed_batch_sizes - 1], o->num_allowed_batch_sizes,
		 sizes[o->num_allowed_batch_sizes - 1], mc->slots, arena * mc->slots / 1024,
		 gm->prog.compiled->prog.const_bytes / 1024);
	return 0;
}

/* ---- reloads ------------------------------------------------------------------------------------ */

#define GPU_RELOAD_TAKE_S 10ull  /* the lcores' taking the new version, at most */
#define GPU_RELOAD_DRAIN_S 30ull /* the old version's last launches, at most */

/* The polling lcores' channels of m whose executor runs (every polling lcore's, once serving). */
static unsigned int gpu_channels_of(const struct app_model *m, struct gpu_channel **chs)
{
	unsigned int n = 0;

	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &app_lcores[l];
		unsigned int nb = __atomic_load_n(&al->nb_channels, __ATOMIC_ACQUIRE);
		struct gpu_channel *gc;

		if (m->spec.id >= nb || al->channels[m->spec.id].executor.ops != &gpu_executor)
			continue;
		gc = al->channels[m->spec.id].executor.ctx;
		if (gc != NULL && gc->gpu != NULL)
			chs[n++] = gc;
	}
	return n;
}

/* A new version's program: the file loaded, checked against the served tensors, compiled, loaded on
 * the device. \return it, or NULL with why and errno. */
static struct gpu_model *gpu_version_load(struct app_model *m, const char *file, char *why, size_t cap)
{
	const struct bat_options *o = &m->cfg.batching;
	int64_t sizes[BAT_ALLOWED_SIZES_MAX];
	struct gpu_model *gm = rte_zmalloc("bw_gpu_model", sizeof(*gm), RTE_CACHE_LINE_SIZE);
	int ret;

	if (gm != NULL)
		gm->graph_spec = rte_zmalloc("bw_gpu_version", sizeof(*gm->graph_spec), RTE_CACHE_LINE_SIZE);
	if (gm == NULL || gm->graph_spec == NULL) {
		snprintf(why, cap, "out of memory");
		rte_free(gm);
		errno = ENOMEM;
		return NULL;
	}
	ret = rt_onnx_model_load(gm->graph_spec, m->spec.id, m->spec.name, file, RT_DEVICE_GPU, NULL, NULL, why, cap);
	if (ret == 0)
		ret = app_model_signature_check(&m->spec, gm->graph_spec, why, cap);
	for (unsigned int i = 0; ret == 0 && i < o->num_allowed_batch_sizes; i++)
		sizes[i] = o->allowed_batch_sizes[i];
	if (ret == 0)
		ret = gpu_host_program_load(&g_gpu.hd, gm->graph_spec->graph, sizes, o->num_allowed_batch_sizes,
					    &(struct gpu_compile_options){ m->cfg.precision, m->cfg.layout }, &gm->prog, why,
					    cap);
	if (ret != 0) {
		gpu_version_free(gm);
		errno = -ret;
		return NULL;
	}
	return gm;
}

/*
 * On the reload thread: the new version compiled and loaded on the device beside the served one,
 * and for each polling lcore an executor of it on a stream of its own, its graphs captured here (a
 * CUDA graph runs on whichever stream it is launched into, from whichever thread). Each lcore takes
 * its new executor between batches (gpu_swap_take) and hands the old one back once its launches
 * are done; then the old program goes. The lcores never wait for any of it.
 */
static int gpu_model_reload(struct app_model *m, const char *file, uint32_t version, char *why, size_t cap)
{
	static struct gpu_channel *chs[RTE_MAX_LCORE];
	static struct gpu_swap *swaps[RTE_MAX_LCORE];
	static bool came_back[RTE_MAX_LCORE]; /* static: one reload at a time (app_reload_mutex) */
	struct gpu_executor_stats unused = {0};
	struct gpu_model *gm, *old = gpu_of(m);
	unsigned int n = gpu_channels_of(m, chs), taken = 0, back = 0;
	uint64_t deadline;
	int ret = 0;

	if (gpu_lost()) {
		snprintf(why, cap, "its GPU is unhealthy (%s)", gpu_lost_why());
		return -ENODEV;
	}
	gm = gpu_version_load(m, file, why, cap);
	if (gm == NULL)
		return -errno;
	for (unsigned int c = 0; c < n && ret == 0; c++) {
		char inner[GPU_ERR_MAX * 2];

		swaps[c] = rte_zmalloc("bw_gpu_swap", sizeof(*swaps[c]), RTE_CACHE_LINE_SIZE);
		if (swaps[c] != NULL)
			swaps[c]->version = version;
		ret = swaps[c] != NULL ? g_gpu.hd.ops->stream_create(g_gpu.hd.dev, &swaps[c]->stream, inner, sizeof(inner))
				       : -ENOMEM;
		if (ret == 0) {
			swaps[c]->gpu = gpu_executor_create(g_gpu.hd.ops, g_gpu.hd.dev, gm->prog.loaded, gm->prog.compiled,
							    swaps[c]->stream, m->cfg.slots, m->cfg.launch_mode, inner,
							    sizeof(inner));
			ret = swaps[c]->gpu != NULL ? 0 : -errno;
		} else if (swaps[c] != NULL) {
			swaps[c]->stream = NULL;
		}
		if (ret != 0) {
			snprintf(why, cap, "lcore %u's executor of it on GPU %d: %s", chs[c]->lcore->lcore_id, g_gpu.hd.index,
				 ret == -ENOMEM && swaps[c] == NULL ? "out of memory" : inner);
			for (unsigned int k = 0; k <= c; k++) {
				if (swaps[k] != NULL) {
					gpu_swap_free(swaps[k], &unused);
					rte_free(swaps[k]);
				}
			}
			gpu_version_free(gm);
			return ret;
		}
	}
	/* published at once: each lcore takes its own at its next batch or poll */
	for (unsigned int c = 0; c < n; c++)
		__atomic_store_n(&chs[c]->pending, swaps[c], __ATOMIC_RELEASE);
	deadline = plat_tsc_now() + plat_us_to_tsc(GPU_RELOAD_TAKE_S * 1000000ull);
	while (taken < n) {
		taken = 0;
		for (unsigned int c = 0; c < n; c++)
			taken += __atomic_load_n(&chs[c]->pending, __ATOMIC_ACQUIRE) == NULL;
		if (taken == n)
			break;
		if (taken == 0 && plat_tsc_now() > deadline) {
			/* no lcore took it: taken back, nothing changed; else some did, and the others will */
			for (unsigned int c = 0; c < n; c++) {
				struct gpu_swap *mine = swaps[c];

				came_back[c] = __atomic_compare_exchange_n(&chs[c]->pending, &mine, NULL, false,
									   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
				back += came_back[c];
			}
			if (back == n) {
				for (unsigned int c = 0; c < n; c++) {
					gpu_swap_free(swaps[c], &unused);
					rte_free(swaps[c]);
				}
				gpu_version_free(gm);
				snprintf(why, cap, "no polling lcore took the new version within %llu s (lcore %u first)",
					 GPU_RELOAD_TAKE_S, chs[0]->lcore->lcore_id);
				return -ETIMEDOUT;
			}
			/* one was taken meanwhile: the rest go back out, and this waits for them too */
			for (unsigned int c = 0; c < n; c++)
				if (came_back[c])
					__atomic_store_n(&chs[c]->pending, swaps[c], __ATOMIC_RELEASE);
			back = 0;
			deadline = UINT64_MAX;
		}
		if (app_reloads_stopping()) {
			/* what was not taken comes back; an lcore that took it runs it until the model goes */
			for (unsigned int c = 0; c < n; c++) {
				struct gpu_swap *mine = swaps[c];

				if (__atomic_compare_exchange_n(&chs[c]->pending, &mine, NULL, false, __ATOMIC_ACQ_REL,
								__ATOMIC_ACQUIRE)) {
					gpu_swap_free(swaps[c], &unused);
					rte_free(swaps[c]);
					back++;
				}
			}
			if (back == n) {
				gpu_version_free(gm);
			} else {
				pthread_mutex_lock(&g_gpu_tel_lock);
				gm->before = old;
				m->priv = gm;
				pthread_mutex_unlock(&g_gpu_tel_lock);
			}
			snprintf(why, cap, "the server is stopping");
			return -ESHUTDOWN;
		}
		usleep(200);
	}
	/* switched: every batch launched from here on runs on the new version */
	pthread_mutex_lock(&g_gpu_tel_lock);
	gm->before = old;
	m->priv = gm;
	pthread_mutex_unlock(&g_gpu_tel_lock);
	__atomic_store_n(&m->version, version, __ATOMIC_RELEASE);
	__atomic_store_n(&m->spec.version, version, __ATOMIC_RELEASE);
	deadline = plat_tsc_now() + plat_us_to_tsc(GPU_RELOAD_DRAIN_S * 1000000ull);
	for (unsigned int c = 0; c < n; c++) {
		while (__atomic_load_n(&chs[c]->retired, __ATOMIC_ACQUIRE) == NULL) {
			if (plat_tsc_now() > deadline || app_reloads_stopping()) {
				snprintf(why, cap, "version %u serves, but the old one still had launches in flight after %llu "
					 "s: it is freed with the model", version, GPU_RELOAD_DRAIN_S);
				return 0;
			}
			usleep(200);
		}
	}
	pthread_mutex_lock(&g_gpu_tel_lock);
	for (unsigned int c = 0; c < n; c++) {
		struct gpu_swap *done = chs[c]->retired;

		gpu_swap_free(done, &chs[c]->freed);
		rte_free(done);
		__atomic_store_n(&chs[c]->retired, NULL, __ATOMIC_RELEASE);
	}
	gm->before = NULL;
	gpu_version_free(old);
	pthread_mutex_unlock(&g_gpu_tel_lock);
	why[0] = '\0';
	return 0;
}

/* ---- the mbuf pools' memory ---------------------------------------------------------------------- */

/* The mbuf pools' memory chunks, every one of them, before merging (gpu_host_ranges_merge). */
struct chunk_list {
	unsigned int count, cap;
	struct gpu_host_range *r;
};

static void chunk_add(struct rte_mempool *mp __rte_unused, void *opaque, struct rte_mempool_memhdr *memhdr,
		      unsigned int mem_idx __rte_unused)
{
	struct chunk_list *list = opaque;

	if (list->count < list->cap)
		list->r[list->count++] = (struct gpu_host_range){ .start = (uintptr_t)memhdr->addr,
								   .end = (uintptr_t)memhdr->addr + memhdr->len };
}

/*
 * One registration per run of contiguous pages, not per chunk: a large pool on 2 MB hugepages in
 * IOVA-as-PA mode has a chunk per hugepage (hundreds), far more than GPU_REGIONS_MAX, but EAL maps
 * them next to each other in virtual memory, so they merge into a few runs. All chunks are collected before merging,
 * so the order rte_mempool_mem_iter gives them in cannot overflow the table early.
 */
static int gpu_memory_register(struct rte_mempool *const *pools, unsigned int nb_pools, FILE *err)
{
	struct chunk_list list = {0};
	char why[GPU_ERR_MAX];
	unsigned int merged;
	int ret = 0;

	if (g_gpu.hd.ops == NULL)
		return 0;
	for (unsigned int p = 0; p < nb_pools; p++)
		list.cap += pools[p]->nb_mem_chunks;
	list.r = calloc(list.cap > 0 ? list.cap : 1, sizeof(*list.r));
	if (list.r == NULL) {
		fprintf(err, "batchwire: registering the mbuf pools with GPU %d: out of memory for %u chunks\n",
			g_gpu.hd.index, list.cap);
		return -ENOMEM;
	}
	for (unsigned int p = 0; p < nb_pools; p++)
		rte_mempool_mem_iter(pools[p], chunk_add, &list);
	merged = gpu_host_ranges_merge(list.r, list.count, (size_t)sysconf(_SC_PAGESIZE));
	if (merged > GPU_REGIONS_MAX) {
		fprintf(err, "batchwire: the mbuf pools' %u memory chunks lie in %u separate runs of pages after "
			"merging contiguous ones; GPU %d registers at most %d (GPU_REGIONS_MAX): give EAL hugepages, "
			"or fewer, larger pools\n", list.count, merged,
			g_gpu.hd.index, GPU_REGIONS_MAX);
		free(list.r);
		return -ENOSPC;
	}
	for (unsigned int i = 0; i < merged && ret == 0; i++) {
		void *addr = (void *)list.r[i].start, *dev_addr;
		size_t len = list.r[i].end - list.r[i].start;

		ret = g_gpu.hd.ops->host_register(g_gpu.hd.dev, addr, len, &dev_addr, why, sizeof(why));
		if (ret != 0) {
			fprintf(err, "batchwire: registering %zu KiB of mbuf pool memory with GPU %d: %s\n", len >> 10,
				g_gpu.hd.index, why);
			break;
		}
		g_gpu.regions[g_gpu.nb_regions++] = addr;
		g_gpu.registered_bytes += len;
	}
	free(list.r);
	if (ret != 0)
		return ret;
	PLAT_LOG(INFO, app, "GPU %d reads requests from and writes replies into the mbuf pools: %u regions, %" PRIu64
		 " MiB registered", g_gpu.hd.index, g_gpu.nb_regions, g_gpu.registered_bytes >> 20);
	return 0;
}

/* ---- telemetry ---------------------------------------------------------------------------------- */

/* Kept per polling lcore: each lcore's channel counts its own launches. */
static void gpu_exec_stats(const struct app_model *m, struct app_exec_stats *sum)
{
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &app_lcores[l];
		unsigned int nb = __atomic_load_n(&al->nb_channels, __ATOMIC_ACQUIRE);
		const struct gpu_channel *gc = m->spec.id < nb ? al->channels[m->spec.id].executor.ctx : NULL;

		if (gc != NULL)
			app_exec_stats_sum(sum, &gc->stats);
	}
}

/*
 * gpu_launches_by_size_slot: {"SIZE": [launches of slot 0, slot 1, ...]} summed over the polling
 * lcores (each has its own instance: slot s of every lcore is one column), so an operator sees
 * which captured graphs run and whether the slots share the load.
 */
static void launches_telemetry(const struct app_model *m, struct rte_tel_data *d)
{
	uint64_t sums[GPU_PROG_SIZES_MAX][APP_MODEL_SLOTS_MAX] = {{0}};
	uint32_t sizes[GPU_PROG_SIZES_MAX] = {0};
	unsigned int nb_sizes = 0, nb_slots = 0;
	struct rte_tel_data *by_size;

	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &app_lcores[l];
		unsigned int nb = __atomic_load_n(&al->nb_channels, __ATOMIC_ACQUIRE);
		const struct gpu_channel *gc;

		if (m->spec.id >= nb || al->channels[m->spec.id].executor.ops != &gpu_executor)
			continue;
		gc = al->channels[m->spec.id].executor.ctx;
		if (gc == NULL || gc->gpu == NULL)
			continue;
		nb_sizes = RTE_MIN(gpu_executor_nb_sizes(gc->gpu), (unsigned int)GPU_PROG_SIZES_MAX);
		nb_slots = RTE_MIN(gpu_executor_nb_slots(gc->gpu), (unsigned int)APP_MODEL_SLOTS_MAX);
		for (unsigned int z = 0; z < nb_sizes; z++) {
			sizes[z] = gpu_executor_size(gc->gpu, z);
			for (unsigned int s = 0; s < nb_slots; s++)
				sums[z][s] += gpu_executor_slot_launches(gc->gpu, z, s);
		}
	}
	if (nb_sizes == 0 || (by_size = rte_tel_data_alloc()) == NULL)
		return;
	rte_tel_data_start_dict(by_size);
	for (unsigned int z = 0; z < nb_sizes; z++) {
		struct rte_tel_data *slots = rte_tel_data_alloc();
		char name[16];

		if (slots == NULL)
			break;
		rte_tel_data_start_array(slots, RTE_TEL_U64_VAL);
		for (unsigned int s = 0; s < nb_slots; s++)
			rte_tel_data_add_array_u64(slots, sums[z][s]);
		snprintf(name, sizeof(name), "%u", sizes[z]);
		rte_tel_data_add_dict_container(by_size, name, slots, 0);
	}
	rte_tel_data_add_dict_container(d, "gpu_launches_by_size_slot", by_size, 0);
}

static void gpu_model_telemetry(const struct app_model *m, struct rte_tel_data *d)
{
	rte_tel_data_add_dict_u64(d, "workers", 0);
	rte_tel_data_add_dict_u64(d, "slots", m->cfg.slots);
	rte_tel_data_add_dict_u64(d, "available", gpu_lost() ? 0 : 1);
	rte_tel_data_add_dict_string(d, "precision", gpu_precision_name(m->cfg.precision));
	pthread_mutex_lock(&g_gpu_tel_lock); /* a reload frees programs and executors under it */
	rte_tel_data_add_dict_string(d, "layout", gpu_layout_name(gpu_of(m)->prog.compiled->layout));
	rte_tel_data_add_dict_string(d, "launch_mode", gpu_launch_mode_name(m->cfg.launch_mode));
	launches_telemetry(m, d);
	pthread_mutex_unlock(&g_gpu_tel_lock);
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
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &app_lcores[l];

		for (unsigned int c = 0; c < al->nb_channels; c++) {
			if (al->channels[c].executor.ops == &gpu_executor)
				checks += ((const struct gpu_channel *)al->channels[c].executor.ctx)->health_checks;
		}
	}
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

static int gpu_telemetry_register(void)
{
	return rte_telemetry_register_cmd("/batchwire/gpu", gpu_cb,
					  "The GPU of the models with device = gpu: name, health and the reason when "
					  "unhealthy, host memory registered. No parameters.");
}

const struct app_engine app_engine_gpu = {
	.name = "gpu",
	.kind = "onnx",
	.device = "gpu",
	.executor = &gpu_executor,
	.request_queue = app_onnx_request_queue,
	.job_done = app_onnx_job_done,
	.init = gpu_init,
	.fini = gpu_fini,
	.model_create = gpu_model_create,
	.model_free = gpu_model_free,
	.model_reload = gpu_model_reload,
	.channel_init = gpu_channel_init,
	.memory_register = gpu_memory_register,
	.exec_stats = gpu_exec_stats,
	.model_telemetry = gpu_model_telemetry,
	.telemetry_register = gpu_telemetry_register,
};
