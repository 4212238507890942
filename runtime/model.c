/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

int rt_registry_add(struct rt_registry *reg, const struct rt_model *model)
{
	if (model->name[0] == '\0')
		return -EINVAL;
	for (unsigned int i = 0; i < reg->count; i++) {
		if (reg->models[i]->id == model->id || strcmp(reg->models[i]->name, model->name) == 0)
			return -EEXIST;
	}
	if (reg->count == RT_MODELS_MAX)
		return -ENOSPC;
	reg->models[reg->count++] = model;
	return 0;
}

const struct rt_model *rt_registry_find_id(const struct rt_registry *reg, uint32_t id)
{
	for (unsigned int i = 0; i < reg->count; i++) {
		if (reg->models[i]->id == id)
			return reg->models[i];
	}
	return NULL;
}

const struct rt_model *rt_registry_find_name(const struct rt_registry *reg, const char *name, uint32_t len)
{
	for (unsigned int i = 0; i < reg->count; i++) {
		const char *candidate = reg->models[i]->name;
		if (strlen(candidate) == len && memcmp(candidate, name, len) == 0)
			return reg->models[i];
	}
	return NULL;
}

int rt_echo_init(struct rt_model *model, uint32_t id, const char *name)
{
	memset(model, 0, sizeof(*model));
	if (snprintf(model->name, sizeof(model->name), "%s", name) >= (int)sizeof(model->name))
		return -EINVAL;
	model->id = id;
	model->kind = RT_MODEL_ECHO;
	model->flags = BW_MODEL_F_ANY_TENSORS;
	model->priority_levels = 1;
	return 0;
}

/* Appends len bytes, zero-padded to 8, at *off. \return 0 or -EMSGSIZE. */
static int put_padded(uint8_t *buf, uint32_t cap, uint32_t *off, const void *src, uint32_t len)
{
	uint32_t padded = bw_pad8(len);

	if ((uint64_t)*off + padded > cap)
		return -EMSGSIZE;
	memcpy(buf + *off, src, len);
	memset(buf + *off + len, 0, padded - len);
	*off += padded;
	return 0;
}

static int put_tensor_spec(uint8_t *buf, uint32_t cap, uint32_t *off, uint16_t index,
			   const struct rt_tensor_spec *spec)
{
	struct bw_tensor_desc desc = {
		.index = index,
		.dtype = spec->dtype,
		.rank = spec->rank,
		.name_len = (uint16_t)strlen(spec->name),
	};

	memcpy(desc.dims, spec->dims, sizeof(desc.dims));
	if (put_padded(buf, cap, off, &desc, sizeof(desc)) != 0)
		return -EMSGSIZE;
	return put_padded(buf, cap, off, spec->name, desc.name_len);
}

int rt_model_describe(const struct rt_model *model, uint8_t *buf, uint32_t cap)
{
	struct bw_model_info info = {
		.model_id = model->id,
		.name_len = (uint16_t)strlen(model->name),
		.flags = model->flags,
		.num_inputs = model->num_inputs,
		.num_outputs = model->num_outputs,
		.num_batch_sizes = model->num_batch_sizes,
		.priority_levels = model->priority_levels,
		.max_batch_size = model->max_batch_size,
	};
	uint32_t off = 0;

	if (put_padded(buf, cap, &off, &info, sizeof(info)) != 0 ||
	    put_padded(buf, cap, &off, model->name, info.name_len) != 0 ||
	    put_padded(buf, cap, &off, model->batch_sizes, model->num_batch_sizes * (uint32_t)sizeof(uint32_t)) != 0)
		return -EMSGSIZE;
	for (uint16_t i = 0; i < model->num_inputs; i++) {
		if (put_tensor_spec(buf, cap, &off, i, &model->inputs[i]) != 0)
			return -EMSGSIZE;
	}
	for (uint16_t i = 0; i < model->num_outputs; i++) {
		if (put_tensor_spec(buf, cap, &off, i, &model->outputs[i]) != 0)
			return -EMSGSIZE;
	}
	return (int)off;
}
