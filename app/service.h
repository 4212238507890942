/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The app's glue between the dataplane, the batcher and the runtime: the models served, offered to
 * the dataplane as dp_model_ops, and the lcores that run them.
 *
 *   polling lcore: RX -> request checked against the model -> its batcher (bat_queue, one per model)
 *                  -> closed batch -> the model's submit ring (rte_ring, MP/SC)
 *   owner worker (the model's first worker lcore): submit ring -> rt_executor_submit (gather, pad)
 *                  -> every worker lcore of the model runs steps (rt_executor_work)
 *                  -> completion -> the submitting lcore's completion ring (SP/SC)
 *   polling lcore: completion ring -> bat_batch_complete -> each request's reply built in its own
 *                  mbuf (outputs sliced per request, padding dropped) -> TX
 *
 * The built-in echo model is its own executor on each polling lcore (outputs = inputs). Nothing on
 * these paths locks, allocates or makes a system call; docs/architecture.md has the ownership rules.
 */
#ifndef BW_APP_SERVICE_H
#define BW_APP_SERVICE_H

#include "batching.h"
#include "config.h"
#include "dataplane.h"
#include "platform.h"
#include "runtime.h"

#define APP_ECHO_COMPLETIONS 1024 /* >= BAT_INFLIGHT_MAX: a batch in flight always has a slot */

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
 * limiter and its submit ring. On failure it prints one line to err naming the model and the reason
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

/** \return true when lcore_id runs steps of some model (a worker lcore). */
bool app_service_is_worker(unsigned int lcore_id);

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

/** Registers /batchwire/models and /batchwire/model,NAME. \return 0 or a negative errno. */
int app_service_telemetry_register(void);

#endif /* BW_APP_SERVICE_H */
