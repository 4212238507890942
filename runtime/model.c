/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <batchwire/batch.h>

#include "runtime.h"
#include "graph.h"
#include "exec/plan.h"

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

static int spec_fill(struct rt_tensor_spec *spec, const char *name, const struct rt_tensor *t, const char *what,
		     char *err, size_t cap)
{
	if (snprintf(spec->name, sizeof(spec->name), "%s", name) >= (int)sizeof(spec->name)) {
		snprintf(err, cap, "%s '%s': name longer than %d bytes", what, name, RT_MODEL_NAME_MAX - 1);
		return -EINVAL;
	}
	if (bw_dtype_size(t->dtype) == 0) {
		snprintf(err, cap, "%s '%s': dtype %s cannot cross the wire", what, name, rt_dtype_name(t->dtype));
		return -EINVAL;
	}
	spec->dtype = t->dtype;
	spec->rank = t->rank;
	spec->index_bound = 0;
	memset(spec->dims, 0, sizeof(spec->dims));
	for (uint8_t d = 1; d < t->rank; d++)
		spec->dims[d] = (uint32_t)t->dims[d];
	return 0;
}

/*
 * The rows of the smallest constant table a Gather indexes with value v (its "indices" input), or 0
 * when no Gather does (or none of a constant table): what admission checks an input's values against,
 * so that one request's bad token id fails that request and not its batch.
 */
static int64_t gather_bound(const struct rt_graph *g, int32_t v)
{
	int64_t bound = 0;

	for (uint32_t n = 0; n < g->num_nodes; n++) {
		const struct rt_node *node = &g->nodes[n];
		const struct rt_value *data;
		int64_t axis;

		if (strcmp(node->op_type, "Gather") != 0 || node->domain[0] != '\0' || node->num_inputs < 2 ||
		    node->inputs[1] != v || node->inputs[0] < 0)
			continue;
		data = &g->values[node->inputs[0]];
		if (data->kind != RT_VALUE_INITIALIZER || data->tensor.rank == 0)
			continue;
		axis = rt_attr_int(node, "axis", 0);
		axis = axis < 0 ? axis + data->tensor.rank : axis;
		if (axis < 0 || axis >= data->tensor.rank || data->tensor.dims[axis] <= 0)
			continue;
		if (bound == 0 || data->tensor.dims[axis] < bound)
			bound = data->tensor.dims[axis];
	}
	return bound;
}

/* Batched serving reads dims[0] of every input as the batch: it must be symbolic, the rest static. */
static int inputs_check(struct rt_model *model, const struct rt_graph *g, char *err, size_t cap)
{
	if (g->num_inputs == 0 || g->num_inputs > BW_BATCH_TENSORS_MAX) {
		snprintf(err, cap, "the model has %u inputs: batched serving takes 1..%u", g->num_inputs,
			 BW_BATCH_TENSORS_MAX);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		const struct rt_value *v = &g->values[g->inputs[i]];
		const struct rt_tensor *t = &v->tensor;
		int64_t row = 1;

		if (t->rank == 0 || t->dims[0] != RT_DIM_SYMBOLIC) {
			snprintf(err, cap, "input '%s': the first dimension must be the batch (a dim_param such as "
				 "'batch'), got %s", v->name, t->rank == 0 ? "a scalar" : "a fixed size");
			return -EINVAL;
		}
		for (uint8_t d = 1; d < t->rank; d++) {
			if (t->dims[d] <= 0 || t->dims[d] > UINT32_MAX) {
				snprintf(err, cap, "input '%s': dimension %u is %s: batched serving needs every "
					 "dimension but the first static", v->name, d,
					 t->dims[d] < 0 ? "symbolic" : "0 or too large");
				return -EINVAL;
			}
			row *= t->dims[d];
		}
		if (spec_fill(&model->inputs[i], v->name, t, "input", err, cap) != 0)
			return -EINVAL;
		if (t->dtype == BW_DTYPE_INT64 || t->dtype == BW_DTYPE_INT32)
			model->inputs[i].index_bound = gather_bound(g, g->inputs[i]);
		row *= (int64_t)bw_dtype_size(t->dtype);
		if (row > UINT32_MAX) {
			snprintf(err, cap, "input '%s': one batch row is %lld bytes", v->name, (long long)row);
			return -EINVAL;
		}
		model->input_row_bytes[i] = (uint32_t)row;
	}
	model->num_inputs = (uint16_t)g->num_inputs;
	return 0;
}

/* Outputs: planned at batches 1 and 2, dims[0] must follow the batch and nothing else may. */
static int outputs_check(struct rt_model *model, const struct rt_graph *g, char *err, size_t cap)
{
	struct rt_tensor out1[BW_BATCH_TENSORS_MAX], out2[BW_BATCH_TENSORS_MAX];
	struct rt_plan *p1, *p2;
	char why[RT_ERR_MAX];
	int ret = 0;

	if (g->num_outputs == 0 || g->num_outputs > BW_BATCH_TENSORS_MAX) {
		snprintf(err, cap, "the model has %u outputs: batched serving takes 1..%u", g->num_outputs,
			 BW_BATCH_TENSORS_MAX);
		return -EINVAL;
	}
	p1 = rt_plan_create(g, 1, RT_DEVICE_CPU, why, sizeof(why));
	p2 = p1 != NULL ? rt_plan_create(g, 2, RT_DEVICE_CPU, why, sizeof(why)) : NULL;
	if (p2 == NULL) {
		snprintf(err, cap, "planning: %s", why);
		rt_plan_free(p1);
		return -EINVAL;
	}
	for (uint32_t o = 0; o < g->num_outputs; o++) {
		struct rt_plan_value_info i1, i2;

		rt_plan_value_info(p1, g->outputs[o], &i1);
		rt_plan_value_info(p2, g->outputs[o], &i2);
		out1[o] = i1.tensor;
		out2[o] = i2.tensor;
	}
	for (uint32_t o = 0; o < g->num_outputs && ret == 0; o++) {
		const char *name = g->values[g->outputs[o]].name;
		int64_t row = (int64_t)bw_dtype_size(out1[o].dtype);
		bool batched = out1[o].rank > 0 && out1[o].rank == out2[o].rank && out1[o].dims[0] == 1 &&
			       out2[o].dims[0] == 2;

		for (uint8_t d = 1; batched && d < out1[o].rank; d++) {
			batched = out1[o].dims[d] == out2[o].dims[d];
			row *= out1[o].dims[d];
		}
		if (!batched) {
			snprintf(err, cap, "output '%s': its first dimension does not follow the batch (batch 1 and 2 "
				 "give different shapes elsewhere, or none): batched serving slices outputs by rows",
				 name);
			ret = -EINVAL;
		} else if (row == 0 || row > UINT32_MAX) {
			snprintf(err, cap, "output '%s': one batch row is %lld bytes", name, (long long)row);
			ret = -EINVAL;
		} else {
			ret = spec_fill(&model->outputs[o], name, &out1[o], "output", err, cap);
			model->output_row_bytes[o] = (uint32_t)row;
		}
	}
	model->num_outputs = (uint16_t)g->num_outputs;
	rt_plan_free(p2);
	rt_plan_free(p1);
	return ret;
}

static int onnx_model_load(struct rt_model *model, uint32_t id, const char *name, const char *path, int device,
			   const struct rt_opt_options *opts, struct rt_opt_report *report, char *err, size_t cap)
{
	char why[RT_ERR_MAX];
	int ret;

	memset(model, 0, sizeof(*model));
	if (name[0] == '\0' || snprintf(model->name, sizeof(model->name), "%s", name) >= (int)sizeof(model->name)) {
		snprintf(err, cap, "model name '%s' is empty or longer than %d bytes", name, RT_MODEL_NAME_MAX - 1);
		return -EINVAL;
	}
	model->id = id;
	model->kind = RT_MODEL_ONNX;
	model->priority_levels = 1;
	ret = rt_cpu_isa_select(why, sizeof(why));
	if (ret != 0) {
		snprintf(err, cap, "CPU kernels: %s", why);
		return ret;
	}
	ret = rt_cpu_kernels_register();
	if (ret != 0) {
		snprintf(err, cap, "CPU kernels: %s", strerror(-ret));
		return ret;
	}
	model->graph = rt_graph_load(path, why, sizeof(why));
	if (model->graph == NULL) {
		snprintf(err, cap, "%s", why);
		return -EINVAL;
	}
	if (opts != NULL && opts->memory_budget != 0 && rt_graph_constant_bytes(model->graph) > opts->memory_budget) {
		snprintf(err, cap, "its weights take %" PRIu64 " MiB, above its memory budget of %" PRIu64 " MiB "
			 "(memory_budget_mb)", rt_graph_constant_bytes(model->graph) >> 20, opts->memory_budget >> 20);
		rt_model_fini(model);
		return -EFBIG;
	}
	ret = rt_graph_optimize_with(model->graph, (enum rt_device)device, opts, report, why, sizeof(why));
	if (ret != 0)
		snprintf(err, cap, "optimising: %s", why);
	if (ret == 0)
		ret = inputs_check(model, model->graph, err, cap);
	if (ret == 0)
		ret = outputs_check(model, model->graph, err, cap);
	if (ret != 0)
		rt_model_fini(model);
	return ret;
}

int rt_onnx_model_load(struct rt_model *model, uint32_t id, const char *name, const char *path, int device,
		       const struct rt_opt_options *opts, struct rt_opt_report *report, char *err, size_t cap)
{
	int ret = onnx_model_load(model, id, name, path, device, opts, report, err, cap);

	/* names and attribute strings from the file reach the message, which is logged: one printable
	 * line (a kernel's or the planner's text is not filtered as the loader's own is) */
	if (ret != 0 && err != NULL && cap > 0)
		bw_name_printable(err, cap, err, (uint32_t)strnlen(err, cap - 1));
	return ret;
}

void rt_model_fini(struct rt_model *model)
{
	if (model->graph != NULL)
		rt_graph_free(model->graph);
	model->graph = NULL;
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
		.version = __atomic_load_n(&model->version, __ATOMIC_ACQUIRE),
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
