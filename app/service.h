/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The app's glue between the dataplane, the batcher and the runtime: the models served, offered to
 * the dataplane as dp_model_ops, and the lcores that run them. Each model runs on an engine (app/defs.h:
 * echo, cpu, gpu), a table of functions chosen once when the model is created:
 *
 *   polling lcore: RX -> request checked against the model (requests.c) -> its batcher (bat_queue, one
 *                  per model and lcore) -> closed batch -> the engine's executor for this lcore
 *                  (struct bw_executor: submit)
 *   cpu:           the model's submit ring (MP/SC) -> its owner worker lcore: rt_executor_submit
 *                  (gather, pad) -> every worker lcore of the model runs steps (rt_executor_work)
 *                  -> completion -> the submitting lcore's completion ring (SP/SC)
 *   gpu:           on the polling lcore itself: the batch table written, one CUDA graph launched; the
 *                  GPU writes a completion word into mapped host memory
 *   echo:          nothing to run: finished at submit, completed from the completion poller
 *   polling lcore: the executor's poll -> bat_batch_complete -> each request's reply built in its own
 *                  mbuf (outputs sliced per request, padding dropped) -> TX
 *
 * Nothing on these paths locks, allocates or makes a system call; docs/architecture.md has the
 * ownership rules.
 */
#ifndef BW_APP_SERVICE_H
#define BW_APP_SERVICE_H

#include "batching.h"
#include "config.h"
#include "dataplane.h"
#include "platform.h"
#include "runtime.h"

struct rte_mempool;

#define APP_DEFERRED_MAX 1024 /* batches finished at submit (echo, failed GPU launches) an lcore holds:
			       * >= BAT_INFLIGHT_MAX, so one model's batches in flight always fit */

struct app_model;

struct app_service {
	struct rt_registry registry;
	unsigned int nb_models;                 /* models[i] has rt_model id i; 0 is echo */
	struct app_model *models[APP_MODELS_MAX];
	struct dp_model_ops ops;
};

/**
 * Loads and registers every configured model (after EAL: worker lcores are checked against it):
 * loads and optimises each ONNX file, plans every batch size, creates its executor, its in-flight
 * limiter and its submit ring. When a model has device = gpu it first opens the GPU (cfg->gpu_module,
 * cfg->gpu_index) and compiles and loads that model's program on it; no device stops start-up. On failure it prints one line to err naming the model and the reason
 * (the loader's error for a bad file) and frees what it made: the daemon never starts half-configured.
 * \return 0 or a negative errno.
 */
int app_service_init(struct app_service *svc, struct app_config *cfg, FILE *err);
void app_service_fini(struct app_service *svc);

/**
 * Sets up one polling lcore's batchers and completion rings; after dp_lcore_init, before the lcore
 * runs. They live until the process exits, since the telemetry thread may read their counters.
 * \return 0 or a negative errno.
 */
int app_service_lcore_init(struct app_service *svc, struct dp_lcore *dp);

/**
 * Registers the mbuf pools' memory (each pool listed once) with the GPU, so that its kernels read
 * requests from and write replies into packet buffers (nothing to do when no model runs on a GPU). After app_service_init,
 * before any lcore starts; app_service_fini unregisters it (call it before the pools are freed).
 * \return 0 or a negative errno, with one line on err.
 */
int app_service_memory_register(struct rte_mempool *const *pools, unsigned int nb_pools, FILE *err);

/**
 * On a polling lcore's own thread, before its poll loop: each model's executor makes what must belong
 * to that thread (bw_executor_ops.lcore_start: for device = gpu, the lcore's GPU stream and executor,
 * since CUDA graphs are captured on the stream of the thread that will launch them).
 * \return 0, or a negative errno with one line in err.
 */
int app_service_lcore_start(unsigned int lcore_id, char *err, size_t cap);

/** \return true when lcore_id runs steps of some model (a worker lcore). */
bool app_service_is_worker(unsigned int lcore_id);

/** The poll loop counters of worker lcore lcore_id (one that does not poll the port): its own loop
 * writes them, /batchwire/workers reads them. */
struct plat_poll_stats *app_service_worker_stats(unsigned int lcore_id);

/**
 * Fills an lcore's poller table: for a polling lcore RX, batch windows, completions and TX drain;
 * for a worker lcore (possibly the same) one poller per model it works for.
 * \param polling  include the polling lcore's pollers
 * \param working  include the worker pollers
 * \return the number of pollers written (at most PLAT_POLLERS_MAX).
 */
unsigned int app_service_pollers(unsigned int lcore_id, bool polling, bool working, struct plat_poller *pollers);

/**
 * Shutdown on the polling lcore: closes every window and runs the lcore's pollers (its worker ones
 * too) until nothing is queued or in flight, or max_us has passed. \return true when everything was
 * answered.
 */
bool app_service_lcore_drain(unsigned int lcore_id, uint64_t max_us);

/** Adds the batch counters, summed over every model, to /batchwire/stats (dp_telemetry_extra_fn). */
void app_service_telemetry(struct rte_tel_data *dict);

/** Registers /batchwire/models, /batchwire/model,NAME and /batchwire/gpu. \return 0 or a negative errno. */
int app_service_telemetry_register(void);

/**
 * Reloads model name (NULL: every model that can reload): the version its policy selects now, made
 * beside the served one and switched to between batches (docs/deploy.md). One reload at a time in
 * the process, on the caller's thread (never an lcore's); blocks until the old version is freed, or
 * a bounded wait ends. Writes one line per model to out. \return 0 when every model named serves
 * what its policy selects, else a negative errno (-ENOENT: no model of that name; -ENOTSUP: its
 * engine cannot reload; -ESHUTDOWN: the server is stopping; a load's own).
 */
int app_models_reload(const char *name, char *out, size_t cap);

/** From the stop signal on: no reload starts, and one running gives up its waits. */
void app_reloads_stop(void);

#endif /* BW_APP_SERVICE_H */
