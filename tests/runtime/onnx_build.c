/* SPDX-License-Identifier: BSD-3-Clause */
/* Test support: ONNX models built from the generated structs (onnx_build.h). */
#include "onnx_build.h"

#include <stdbool.h>
#include <string.h>

void onnx_build_opset(Onnx__ModelProto *m, const char *domain, int64_t version)
{
	Onnx__OperatorSetIdProto *op = NEW(Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);

	op->domain = strdup(domain);
	op->has_version = true;
	op->version = version;
	PUSH(m->opset_import, m->n_opset_import, op);
}

Onnx__ModelProto *onnx_build_model_new(const char *producer, int64_t ir_version, int64_t opset)
{
	Onnx__ModelProto *m = NEW(Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);

	m->has_ir_version = true;
	m->ir_version = ir_version;
	if (producer != NULL)
		m->producer_name = strdup(producer);
	if (opset > 0)
		onnx_build_opset(m, "", opset);
	m->graph = NEW(Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
	m->graph->name = strdup("g");
	return m;
}

void onnx_build_model_free(Onnx__ModelProto *m)
{
	onnx__model_proto__free_unpacked(m, NULL);
}

Onnx__TypeProto *onnx_build_type_new(int32_t dtype, int rank, const int64_t *dims)
{
	Onnx__TypeProto *tp = NEW(Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
	Onnx__TypeProto__Tensor *tt = NEW(Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);

	tt->has_elem_type = true;
	tt->elem_type = dtype;
	if (rank >= 0) {
		tt->shape = NEW(Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
		for (int d = 0; d < rank; d++) {
			Onnx__TensorShapeProto__Dimension *dim =
				NEW(Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);

			if (dims[d] >= 0) {
				dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
				dim->dim_value = dims[d];
			} else if (dims[d] == -1) {
				dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
				dim->dim_param = strdup("N");
			}
			PUSH(tt->shape->dim, tt->shape->n_dim, dim);
		}
	}
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	return tp;
}

Onnx__ValueInfoProto *onnx_build_value_info_new(const char *name, int32_t dtype, int rank, const int64_t *dims)
{
	Onnx__ValueInfoProto *vi = NEW(Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);

	vi->name = strdup(name);
	vi->type = onnx_build_type_new(dtype, rank, dims);
	return vi;
}

void onnx_build_input(Onnx__ModelProto *m, const char *name, int32_t dtype, int rank, const int64_t *dims)
{
	PUSH(m->graph->input, m->graph->n_input, onnx_build_value_info_new(name, dtype, rank, dims));
}

void onnx_build_output(Onnx__ModelProto *m, const char *name, int32_t dtype, int rank, const int64_t *dims)
{
	PUSH(m->graph->output, m->graph->n_output, onnx_build_value_info_new(name, dtype, rank, dims));
}

void onnx_build_value_info(Onnx__ModelProto *m, const char *name, int32_t dtype, int rank, const int64_t *dims)
{
	PUSH(m->graph->value_info, m->graph->n_value_info, onnx_build_value_info_new(name, dtype, rank, dims));
}

Onnx__TensorProto *onnx_build_tensor_new(const char *name, int32_t dtype, size_t rank, const int64_t *dims)
{
	Onnx__TensorProto *t = NEW(Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);

	if (name != NULL)
		t->name = strdup(name);
	t->has_data_type = true;
	t->data_type = dtype;
	for (size_t d = 0; d < rank; d++)
		PUSH(t->dims, t->n_dims, dims[d]);
	return t;
}

Onnx__TensorProto *onnx_build_initializer(Onnx__ModelProto *m, const char *name, int32_t dtype, size_t rank,
					  const int64_t *dims)
{
	Onnx__TensorProto *t = onnx_build_tensor_new(name, dtype, rank, dims);

	PUSH(m->graph->initializer, m->graph->n_initializer, t);
	return t;
}

static void split_names(const char *list, size_t *n, char ***names)
{
	const char *p = list;

	if (list == NULL || list[0] == '\0')
		return;
	for (;;) {
		size_t len = strcspn(p, ",");

		PUSH(*names, *n, strndup(p, len));
		if (p[len] == '\0')
			break;
		p += len + 1;
	}
}

Onnx__NodeProto *onnx_build_node(Onnx__ModelProto *m, const char *name, const char *op, const char *ins,
				 const char *outs)
{
	Onnx__NodeProto *n = NEW(Onnx__NodeProto, ONNX__NODE_PROTO__INIT);

	if (name != NULL)
		n->name = strdup(name);
	n->op_type = strdup(op);
	split_names(ins, &n->n_input, &n->input);
	split_names(outs, &n->n_output, &n->output);
	PUSH(m->graph->node, m->graph->n_node, n);
	return n;
}

Onnx__AttributeProto *onnx_build_attr(Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto *a = NEW(Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);

	a->name = strdup(name);
	a->has_type = true;
	a->type = type;
	PUSH(n->attribute, n->n_attribute, a);
	return a;
}

void onnx_build_attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = onnx_build_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

	a->has_i = true;
	a->i = v;
}

void onnx_build_attr_float(Onnx__NodeProto *n, const char *name, float v)
{
	Onnx__AttributeProto *a = onnx_build_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);

	a->has_f = true;
	a->f = v;
}

void onnx_build_attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count)
{
	Onnx__AttributeProto *a = onnx_build_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);

	for (size_t i = 0; i < count; i++)
		PUSH(a->ints, a->n_ints, v[i]);
}

uint8_t *onnx_build_pack(const Onnx__ModelProto *m, size_t *len)
{
	uint8_t *buf;

	*len = onnx__model_proto__get_packed_size(m);
	buf = malloc(*len + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	CU_ASSERT_EQUAL_FATAL(onnx__model_proto__pack(m, buf), *len);
	return buf;
}
