/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The built-in echo model: its outputs are its inputs, already where the reply goes (the request's
 * own mbuf), so a batch has nothing to compute and finishes as it is submitted, from the completion
 * poller (app_deferred_push) as any executor's batch would. No workers, no device.
 */
#include <rte_telemetry.h>

#include "defs.h"

static int echo_submit(void *ctx, struct bw_batch *batch)
{
	struct app_channel *ch = ctx;

	return app_deferred_push(ch->lcore, batch, BW_STATUS_OK);
}

static const struct bw_executor_ops echo_executor = {
	.name = "echo",
	.submit = echo_submit,
};

static int echo_model_create(struct app_model *m, FILE *err)
{
	int ret = rt_echo_init(&m->spec, m->spec.id, m->cfg.name);

	if (ret != 0)
		fprintf(err, "batchwire: model '%s': the name does not fit (at most %d bytes)\n", m->cfg.name,
			RT_MODEL_NAME_MAX - 1);
	return ret;
}

static int echo_channel_init(struct app_channel *ch, int socket __rte_unused)
{
	ch->executor.ctx = ch;
	return 0;
}

static void echo_model_telemetry(const struct app_model *m __rte_unused, struct rte_tel_data *d)
{
	rte_tel_data_add_dict_u64(d, "workers", 0);
	rte_tel_data_add_dict_u64(d, "slots", 0);
}

const struct app_engine app_engine_echo = {
	.name = "echo",
	.kind = "echo",
	.device = "cpu",
	.executor = &echo_executor,
	.request_queue = app_echo_request_queue,
	.job_done = app_echo_job_done,
	.model_create = echo_model_create,
	.channel_init = echo_channel_init,
	.model_telemetry = echo_model_telemetry,
};
