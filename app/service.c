/* SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "service.h"

static const void *service_lookup(void *ctx, uint32_t id, const char *name, uint32_t name_len)
{
	const struct rt_registry *reg = ctx;

	if (id == BW_MODEL_ID_ANY)
		return rt_registry_find_name(reg, name, name_len);
	return rt_registry_find_id(reg, id);
}

static uint32_t service_priority_levels(const void *model)
{
	return ((const struct rt_model *)model)->priority_levels;
}

static int service_describe(const void *model, uint8_t *buf, uint32_t cap)
{
	return rt_model_describe(model, buf, cap);
}

static enum bw_status service_infer(void *ctx __rte_unused, const void *handle, struct dp_request *req,
				    uint32_t body_cap __rte_unused, uint32_t *reply_len, uint16_t *reply_tensors,
				    char *msg, size_t msg_cap)
{
	const struct rt_model *model = handle;

	switch (model->kind) {
	case RT_MODEL_ECHO:
		/* Outputs are the inputs: the request body, already in place, is the reply body. */
		*reply_len = req->hdr->body_len;
		*reply_tensors = req->num_tensors;
		return BW_STATUS_OK;
	}
	snprintf(msg, msg_cap, "model '%s' has a kind this server cannot run", model->name);
	return BW_STATUS_INTERNAL;
}

int app_service_init(struct app_service *svc)
{
	int ret;

	memset(svc, 0, sizeof(*svc));
	ret = rt_echo_init(&svc->echo, RT_ECHO_MODEL_ID, RT_ECHO_MODEL_NAME);
	if (ret != 0)
		return ret;
	ret = rt_registry_add(&svc->registry, &svc->echo);
	if (ret != 0)
		return ret;
	svc->ops = (struct dp_model_ops){
		.lookup = service_lookup,
		.priority_levels = service_priority_levels,
		.describe = service_describe,
		.infer = service_infer,
		.ctx = &svc->registry,
	};
	return 0;
}
