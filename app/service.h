/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The app's glue between the dataplane, the batcher and the runtime: the models served, offered to
 * the dataplane as dp_model_ops. INFER requests go through each polling lcore's batcher; the echo
 * model is its executor (outputs = inputs), completing batches on the same lcore.
 */
#ifndef BW_APP_SERVICE_H
#define BW_APP_SERVICE_H

#include "batching.h"
#include "config.h"
#include "dataplane.h"
#include "platform.h"
#include "runtime.h"

#define APP_ECHO_COMPLETIONS 1024 /* >= BAT_INFLIGHT_MAX: a batch in flight always has a slot */

struct app_service {
	struct rt_registry registry;
	struct rt_model echo;
	struct bat_options echo_batching;
	struct bat_limiter *echo_limiter; /* shared by every polling lcore */
	struct dp_model_ops ops;
};

/**
 * Registers the built-in models with their batching configuration and fills svc->ops.
 * \return 0 or a negative errno.
 */
int app_service_init(struct app_service *svc, const struct app_config *cfg);
void app_service_fini(struct app_service *svc);

/**
 * Sets up one polling lcore's batchers; after dp_lcore_init, before the lcore runs. They live until
 * the process exits, since the telemetry thread may read their counters until then.
 * \return 0 or a negative errno.
 */
int app_service_lcore_init(struct app_service *svc, struct dp_lcore *dp);

/**
 * Fills the lcore's poller table: RX, batch windows, executor completions, TX drain.
 * \return the number of pollers written (at most PLAT_POLLERS_MAX).
 */
unsigned int app_service_pollers(unsigned int lcore_id, struct plat_poller *pollers);

/**
 * Shutdown on the polling lcore: closes every window and runs the pollers until nothing is queued or
 * in flight, or max_us has passed. \return true when everything was answered.
 */
bool app_service_lcore_drain(unsigned int lcore_id, uint64_t max_us);

/** Adds the batch counters to /batchwire/stats (dp_telemetry_extra_fn). */
void app_service_telemetry(struct rte_tel_data *dict);

#endif /* BW_APP_SERVICE_H */
