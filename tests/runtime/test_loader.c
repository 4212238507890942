/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the ONNX loader (runtime/onnx). Models are built here with the structs protoc-c
 * generates from onnx.proto, packed to bytes or files, and loaded back: a valid graph comes out with
 * its values, attributes, opsets and a topological node order; every broken file (truncated, garbage,
 * inconsistent sizes, hostile external data paths, cycles, unknown ops) gets one clear line and never
 * a crash. The registry holds a few fake kernels (no infer or run: only their opset ranges matter).
 * libonnx-testdata's test_add model runs alone (argument testdata-add, meson test
 * runtime-loader-testdata): it reports SKIP where the package is not installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "graph.h"
#include "onnx.pb-c.h"
#include "onnx_build.h"
#include "onnx/onnx_load.h"

#define TESTDATA_ADD "/usr/share/libonnx-testdata/data/node/test_add/model.onnx"

static const struct rt_kernel g_fake_kernels[] = {
	{.op_type = "Relu", .domain = "", .opset_min = 6, .opset_max = 14, .dtypes = RT_DTYPE_BIT(BW_DTYPE_FLOAT)},
	{.op_type = "Add", .domain = "", .opset_min = 7, .opset_max = 17, .dtypes = RT_DTYPE_BIT(BW_DTYPE_FLOAT)},
	{.op_type = "MatMul", .domain = "", .opset_min = 1, .opset_max = 17, .dtypes = RT_DTYPE_BIT(BW_DTYPE_FLOAT)},
	{.op_type = "Identity", .domain = "", .opset_min = 1, .opset_max = 17, .dtypes = RT_DTYPE_BIT(BW_DTYPE_FLOAT)},
	{.op_type = "Constant", .domain = "", .opset_min = 1, .opset_max = 17, .dtypes = ~UINT32_C(0)},
	{.op_type = "If", .domain = "", .opset_min = 1, .opset_max = 17, .dtypes = ~UINT32_C(0)},
};

static char g_tmpdir[64];

/* ---- building models with the generated structs (onnx_build.h) -------------------------------------- */

static Onnx__ModelProto *model_new(int64_t ir_version, int64_t opset)
{
	return onnx_build_model_new("test_loader", ir_version, opset);
}

static void tensor_raw(Onnx__TensorProto *t, const void *data, size_t len)
{
	t->has_raw_data = true;
	t->raw_data.len = len;
	t->raw_data.data = malloc(len + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t->raw_data.data);
	memcpy(t->raw_data.data, data, len);
}

static void tensor_external(Onnx__TensorProto *t, const char *location, const char *offset, const char *length)
{
	const char *keys[] = {"location", "offset", "length"};
	const char *values[] = {location, offset, length};

	t->has_data_location = true;
	t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	for (int i = 0; i < 3; i++) {
		Onnx__StringStringEntryProto *e;
		if (values[i] == NULL)
			continue;
		e = NEW(Onnx__StringStringEntryProto, ONNX__STRING_STRING_ENTRY_PROTO__INIT);
		e->key = strdup(keys[i]);
		e->value = strdup(values[i]);
		PUSH(t->external_data, t->n_external_data, e);
	}
}

static bool one_line(const char *s)
{
	if (s[0] == '\0')
		return false;
	for (; *s != '\0'; s++) {
		if ((unsigned char)*s < 0x20)
			return false;
	}
	return true;
}

/* Loads m from memory (dir for external data); frees m. */
static struct rt_graph *load_model(Onnx__ModelProto *m, const char *dir, char *err)
{
	size_t len;
	uint8_t *buf = onnx_build_pack(m, &len);
	struct rt_graph *g;

	onnx_build_model_free(m);
	err[0] = '\0';
	g = rt_graph_load_buffer(buf, len, dir, err, RT_ERR_MAX);
	free(buf);
	if (g == NULL)
		CU_ASSERT_TRUE(one_line(err));
	return g;
}

/* Expects the load of m to fail with exactly want (or containing it when contains). */
static void expect_error(Onnx__ModelProto *m, const char *dir, const char *want, bool contains)
{
	char err[RT_ERR_MAX];
	struct rt_graph *g = load_model(m, dir, err);

	CU_ASSERT_PTR_NULL(g);
	rt_graph_free(g);
	if (contains ? strstr(err, want) == NULL : strcmp(err, want) != 0) {
		printf("\n    expected %s\"%s\"\n    got \"%s\"\n", contains ? "a line with " : "", want, err);
		CU_FAIL("error message");
	}
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
	CU_ASSERT_EQUAL(fclose(f), 0);
}

static void tmp_path(char *out, size_t cap, const char *name)
{
	snprintf(out, cap, "%s/%s", g_tmpdir, name);
}

/* A minimal valid model: x -> Relu -> y at opset 13. */
static Onnx__ModelProto *relu_model(int64_t ir_version, int64_t opset)
{
	static const int64_t dims[] = {-1, 4};
	Onnx__ModelProto *m = model_new(ir_version, opset);

	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 2, dims);
	onnx_build_node(m, "relu", "Relu", "x", "y");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 2, dims);
	return m;
}

/* ---- a valid graph ------------------------------------------------------------------------------- */

static const struct rt_value *value(const struct rt_graph *g, const char *name)
{
	int32_t idx = rt_graph_value_find(g, name);

	CU_ASSERT_FATAL(idx >= 0);
	return &g->values[idx];
}

static void test_valid_graph(void)
{
	static const int64_t x_dims[] = {-1, 3}, w_dims[] = {3, 2}, b_dims[] = {2}, i_dims[] = {3}, q_dims[] = {4};
	static const int64_t y_dims[] = {-1, 2}, xw_dims[] = {-1, -2};
	static const float w[] = {1, 2, 3, 4, 5, 6};
	Onnx__ModelProto *m = model_new(8, 13);
	Onnx__TensorProto *t;
	Onnx__NodeProto *n;
	Onnx__AttributeProto *a;
	char err[RT_ERR_MAX];

	onnx_build_opset(m, "ai.onnx.ml", 2);
	onnx_build_input(m, "X", BW_DTYPE_FLOAT, 2, x_dims);
	onnx_build_input(m, "W", BW_DTYPE_FLOAT, 2, w_dims); /* also an initializer: a constant for us */
	t = onnx_build_initializer(m, "W", BW_DTYPE_FLOAT, 2, w_dims);
	tensor_raw(t, w, sizeof(w));
	t = onnx_build_initializer(m, "B", BW_DTYPE_FLOAT, 1, b_dims);
	PUSH(t->float_data, t->n_float_data, 0.5f);
	PUSH(t->float_data, t->n_float_data, -1.5f);
	t = onnx_build_initializer(m, "I", BW_DTYPE_INT64, 1, i_dims);
	PUSH(t->int64_data, t->n_int64_data, INT64_MIN);
	PUSH(t->int64_data, t->n_int64_data, 0);
	PUSH(t->int64_data, t->n_int64_data, INT64_C(1) << 40);
	t = onnx_build_initializer(m, "Q", BW_DTYPE_INT8, 1, q_dims);
	PUSH(t->int32_data, t->n_int32_data, -3);
	PUSH(t->int32_data, t->n_int32_data, 0);
	PUSH(t->int32_data, t->n_int32_data, 127);
	PUSH(t->int32_data, t->n_int32_data, -128);

	onnx_build_node(m, "mm", "MatMul", "X,W", "XW");
	n = onnx_build_node(m, NULL, "Add", "XW,B", "Y,"); /* unnamed; an omitted optional output */
	a = onnx_build_attr(n, "f", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	a->has_f = true;
	a->f = 0.25f;
	a = onnx_build_attr(n, "i", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_i = true;
	a->i = -7;
	a = onnx_build_attr(n, "s", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
	a->has_s = true;
	a->s.len = 5;
	a->s.data = (uint8_t *)strdup("SAME_");
	a = onnx_build_attr(n, "t", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
	a->t = onnx_build_tensor_new(NULL, BW_DTYPE_INT64, 1, b_dims);
	PUSH(a->t->int64_data, a->t->n_int64_data, 11);
	PUSH(a->t->int64_data, a->t->n_int64_data, 12);
	a = onnx_build_attr(n, "fs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
	PUSH(a->floats, a->n_floats, 1.0f);
	PUSH(a->floats, a->n_floats, 2.0f);
	a = onnx_build_attr(n, "is", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	PUSH(a->ints, a->n_ints, 3);
	PUSH(a->ints, a->n_ints, -4);
	PUSH(a->ints, a->n_ints, 5);
	a = onnx_build_attr(n, "ss", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
	PUSH(a->strings, a->n_strings, ((ProtobufCBinaryData){3, (uint8_t *)strdup("abc")}));
	PUSH(a->strings, a->n_strings, ((ProtobufCBinaryData){0, NULL}));
	onnx_build_value_info(m, "XW", BW_DTYPE_FLOAT, 2, xw_dims);
	onnx_build_value_info(m, "nowhere", BW_DTYPE_FLOAT, 1, b_dims); /* names nothing: ignored */
	onnx_build_output(m, "Y", BW_DTYPE_FLOAT, 2, y_dims);

	struct rt_graph *g = load_model(m, NULL, err);
	if (g == NULL)
		printf("\n    %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);

	CU_ASSERT_STRING_EQUAL(g->name, "g");
	CU_ASSERT_EQUAL(g->ir_version, 8);
	CU_ASSERT_EQUAL_FATAL(g->num_opsets, 2);
	CU_ASSERT_STRING_EQUAL(g->opsets[0].domain, "");
	CU_ASSERT_EQUAL(g->opsets[0].version, 13);
	CU_ASSERT_STRING_EQUAL(g->opsets[1].domain, "ai.onnx.ml");
	CU_ASSERT_EQUAL(g->opsets[1].version, 2);

	/* values: W is an initializer, not an input; node outputs are intermediates */
	CU_ASSERT_EQUAL(g->num_values, 7);
	CU_ASSERT_EQUAL_FATAL(g->num_inputs, 1);
	CU_ASSERT_EQUAL(g->inputs[0], rt_graph_value_find(g, "X"));
	CU_ASSERT_EQUAL_FATAL(g->num_outputs, 1);
	CU_ASSERT_EQUAL(g->outputs[0], rt_graph_value_find(g, "Y"));

	const struct rt_value *v = value(g, "X");
	CU_ASSERT_EQUAL(v->kind, RT_VALUE_INPUT);
	CU_ASSERT_EQUAL(v->tensor.dtype, BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL(v->tensor.rank, 2);
	CU_ASSERT_EQUAL(v->tensor.dims[0], RT_DIM_SYMBOLIC);
	CU_ASSERT_EQUAL(v->tensor.dims[1], 3);
	CU_ASSERT_PTR_NULL(v->tensor.data);
	CU_ASSERT_EQUAL(v->producer, -1);
	CU_ASSERT_FALSE(v->is_output);

	v = value(g, "W");
	CU_ASSERT_EQUAL(v->kind, RT_VALUE_INITIALIZER);
	CU_ASSERT_EQUAL(v->tensor.rank, 2);
	CU_ASSERT_EQUAL(v->tensor.dims[0], 3);
	CU_ASSERT_EQUAL(v->tensor.dims[1], 2);
	CU_ASSERT_EQUAL(v->nbytes, sizeof(w));
	CU_ASSERT_PTR_NOT_NULL_FATAL(v->tensor.data);
	CU_ASSERT_EQUAL(memcmp(v->tensor.data, w, sizeof(w)), 0);

	v = value(g, "B");
	CU_ASSERT_EQUAL(v->kind, RT_VALUE_INITIALIZER);
	CU_ASSERT_EQUAL(v->nbytes, 8);
	CU_ASSERT_EQUAL(((const float *)v->tensor.data)[0], 0.5f);
	CU_ASSERT_EQUAL(((const float *)v->tensor.data)[1], -1.5f);

	v = value(g, "I");
	CU_ASSERT_EQUAL(v->tensor.dtype, BW_DTYPE_INT64);
	CU_ASSERT_EQUAL(v->nbytes, 24);
	CU_ASSERT_EQUAL(((const int64_t *)v->tensor.data)[0], INT64_MIN);
	CU_ASSERT_EQUAL(((const int64_t *)v->tensor.data)[2], INT64_C(1) << 40);

	v = value(g, "Q");
	CU_ASSERT_EQUAL(v->tensor.dtype, BW_DTYPE_INT8);
	CU_ASSERT_EQUAL(v->nbytes, 4);
	CU_ASSERT_EQUAL(((const int8_t *)v->tensor.data)[0], -3);
	CU_ASSERT_EQUAL(((const int8_t *)v->tensor.data)[1], 0);
	CU_ASSERT_EQUAL(((const int8_t *)v->tensor.data)[2], 127);
	CU_ASSERT_EQUAL(((const int8_t *)v->tensor.data)[3], -128);

	v = value(g, "XW");
	CU_ASSERT_EQUAL(v->kind, RT_VALUE_INTERMEDIATE);
	CU_ASSERT_EQUAL(v->tensor.dtype, BW_DTYPE_FLOAT); /* from value_info */
	CU_ASSERT_EQUAL(v->tensor.rank, 2);
	CU_ASSERT_EQUAL(v->tensor.dims[0], RT_DIM_SYMBOLIC);
	CU_ASSERT_EQUAL(v->tensor.dims[1], RT_DIM_SYMBOLIC); /* a dim with neither value nor param */
	CU_ASSERT_EQUAL(v->producer, 0);

	v = value(g, "Y");
	CU_ASSERT_TRUE(v->is_output);
	CU_ASSERT_EQUAL(v->tensor.dtype, BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL(v->tensor.dims[1], 2);
	CU_ASSERT_EQUAL(v->producer, 1);

	/* nodes */
	CU_ASSERT_EQUAL_FATAL(g->num_nodes, 2);
	const struct rt_node *mm = &g->nodes[0], *add = &g->nodes[1];
	CU_ASSERT_STRING_EQUAL(mm->name, "mm");
	CU_ASSERT_STRING_EQUAL(mm->op_type, "MatMul");
	CU_ASSERT_STRING_EQUAL(mm->domain, "");
	CU_ASSERT_EQUAL(mm->opset, 13);
	CU_ASSERT_EQUAL_FATAL(mm->num_inputs, 2);
	CU_ASSERT_EQUAL(mm->inputs[0], rt_graph_value_find(g, "X"));
	CU_ASSERT_EQUAL(mm->inputs[1], rt_graph_value_find(g, "W"));
	CU_ASSERT_EQUAL_FATAL(mm->num_outputs, 1);
	CU_ASSERT_EQUAL(mm->outputs[0], rt_graph_value_find(g, "XW"));
	CU_ASSERT_EQUAL(mm->num_attrs, 0);
	CU_ASSERT_PTR_NULL(mm->kernel);

	CU_ASSERT_STRING_EQUAL(add->name, "Add_1");
	CU_ASSERT_EQUAL_FATAL(add->num_outputs, 2);
	CU_ASSERT_EQUAL(add->outputs[0], rt_graph_value_find(g, "Y"));
	CU_ASSERT_EQUAL(add->outputs[1], RT_VALUE_NONE);
	CU_ASSERT_EQUAL_FATAL(add->num_attrs, 7);
	CU_ASSERT_EQUAL(rt_attr_float(add, "f", 0), 0.25f);
	CU_ASSERT_EQUAL(rt_attr_int(add, "i", 0), -7);
	CU_ASSERT_STRING_EQUAL(rt_attr_string(add, "s", ""), "SAME_");
	const struct rt_attr *at = rt_node_attr(add, "t");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	CU_ASSERT_EQUAL(at->type, RT_ATTR_TENSOR);
	CU_ASSERT_EQUAL(at->tensor.dtype, BW_DTYPE_INT64);
	CU_ASSERT_EQUAL(at->tensor.rank, 1);
	CU_ASSERT_EQUAL(at->tensor.dims[0], 2);
	CU_ASSERT_EQUAL(((const int64_t *)at->tensor.data)[1], 12);
	at = rt_node_attr(add, "fs");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	CU_ASSERT_EQUAL(at->type, RT_ATTR_FLOATS);
	CU_ASSERT_EQUAL_FATAL(at->count, 2);
	CU_ASSERT_EQUAL(at->floats[1], 2.0f);
	at = rt_node_attr(add, "is");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	CU_ASSERT_EQUAL(at->type, RT_ATTR_INTS);
	CU_ASSERT_EQUAL_FATAL(at->count, 3);
	CU_ASSERT_EQUAL(at->ints[0], 3);
	CU_ASSERT_EQUAL(at->ints[1], -4);
	CU_ASSERT_EQUAL(at->ints[2], 5);
	at = rt_node_attr(add, "ss");
	CU_ASSERT_PTR_NOT_NULL_FATAL(at);
	CU_ASSERT_EQUAL(at->type, RT_ATTR_STRINGS);
	CU_ASSERT_EQUAL_FATAL(at->count, 2);
	CU_ASSERT_STRING_EQUAL(at->strings[0], "abc");
	CU_ASSERT_STRING_EQUAL(at->strings[1], "");
	CU_ASSERT_PTR_NULL(rt_node_attr(add, "missing"));
	rt_graph_free(g);
}

/* Every element type through its typed field, and raw_data of a few. */
static void test_typed_fields(void)
{
	static const int64_t d2[] = {2}, d0[] = {0};
	Onnx__ModelProto *m = relu_model(7, 13);
	Onnx__TensorProto *t;
	char err[RT_ERR_MAX];

	t = onnx_build_initializer(m, "u8", BW_DTYPE_UINT8, 1, d2);
	PUSH(t->int32_data, t->n_int32_data, 0);
	PUSH(t->int32_data, t->n_int32_data, 255);
	t = onnx_build_initializer(m, "i16", BW_DTYPE_INT16, 1, d2);
	PUSH(t->int32_data, t->n_int32_data, -32768);
	PUSH(t->int32_data, t->n_int32_data, 32767);
	t = onnx_build_initializer(m, "u16", BW_DTYPE_UINT16, 1, d2);
	PUSH(t->int32_data, t->n_int32_data, 65535);
	PUSH(t->int32_data, t->n_int32_data, 1);
	t = onnx_build_initializer(m, "b", BW_DTYPE_BOOL, 1, d2);
	PUSH(t->int32_data, t->n_int32_data, 1);
	PUSH(t->int32_data, t->n_int32_data, 0);
	t = onnx_build_initializer(m, "h", BW_DTYPE_FLOAT16, 1, d2);
	PUSH(t->int32_data, t->n_int32_data, 0x3c00); /* 1.0 */
	PUSH(t->int32_data, t->n_int32_data, 0xc000); /* -2.0 */
	t = onnx_build_initializer(m, "i32", BW_DTYPE_INT32, 1, d2);
	PUSH(t->int32_data, t->n_int32_data, INT32_MIN);
	PUSH(t->int32_data, t->n_int32_data, 7);
	t = onnx_build_initializer(m, "u32", BW_DTYPE_UINT32, 1, d2);
	PUSH(t->uint64_data, t->n_uint64_data, UINT32_MAX);
	PUSH(t->uint64_data, t->n_uint64_data, 9);
	t = onnx_build_initializer(m, "u64", BW_DTYPE_UINT64, 1, d2);
	PUSH(t->uint64_data, t->n_uint64_data, UINT64_MAX);
	PUSH(t->uint64_data, t->n_uint64_data, 10);
	t = onnx_build_initializer(m, "f64", BW_DTYPE_DOUBLE, 1, d2);
	PUSH(t->double_data, t->n_double_data, 0.125);
	PUSH(t->double_data, t->n_double_data, -1e300);
	t = onnx_build_initializer(m, "i64raw", BW_DTYPE_INT64, 1, d2);
	tensor_raw(t, "\x01\x00\x00\x00\x00\x00\x00\x00\xfe\xff\xff\xff\xff\xff\xff\xff", 16);
	t = onnx_build_initializer(m, "empty", BW_DTYPE_FLOAT, 1, d0);
	t = onnx_build_initializer(m, "scalar", BW_DTYPE_FLOAT, 0, NULL);
	PUSH(t->float_data, t->n_float_data, 3.5f);
	t = onnx_build_initializer(m, "str", RT_DTYPE_STRING, 1, d2);
	PUSH(t->string_data, t->n_string_data, ((ProtobufCBinaryData){1, (uint8_t *)strdup("a")}));
	PUSH(t->string_data, t->n_string_data, ((ProtobufCBinaryData){1, (uint8_t *)strdup("b")}));

	struct rt_graph *g = load_model(m, NULL, err);
	if (g == NULL)
		printf("\n    %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(((const uint8_t *)value(g, "u8")->tensor.data)[1], 255);
	CU_ASSERT_EQUAL(((const int16_t *)value(g, "i16")->tensor.data)[0], -32768);
	CU_ASSERT_EQUAL(((const uint16_t *)value(g, "u16")->tensor.data)[0], 65535);
	CU_ASSERT_EQUAL(value(g, "b")->nbytes, 2);
	CU_ASSERT_EQUAL(((const uint8_t *)value(g, "b")->tensor.data)[0], 1);
	CU_ASSERT_EQUAL(((const uint16_t *)value(g, "h")->tensor.data)[1], 0xc000);
	CU_ASSERT_EQUAL(((const int32_t *)value(g, "i32")->tensor.data)[0], INT32_MIN);
	CU_ASSERT_EQUAL(value(g, "u32")->nbytes, 8);
	CU_ASSERT_EQUAL(((const uint32_t *)value(g, "u32")->tensor.data)[0], UINT32_MAX);
	CU_ASSERT_EQUAL(((const uint64_t *)value(g, "u64")->tensor.data)[0], UINT64_MAX);
	CU_ASSERT_EQUAL(((const double *)value(g, "f64")->tensor.data)[1], -1e300);
	CU_ASSERT_EQUAL(((const int64_t *)value(g, "i64raw")->tensor.data)[0], 1);
	CU_ASSERT_EQUAL(((const int64_t *)value(g, "i64raw")->tensor.data)[1], -2);
	CU_ASSERT_EQUAL(value(g, "empty")->nbytes, 0);
	CU_ASSERT_PTR_NOT_NULL(value(g, "empty")->tensor.data);
	CU_ASSERT_EQUAL(value(g, "scalar")->tensor.rank, 0);
	CU_ASSERT_EQUAL(*(const float *)value(g, "scalar")->tensor.data, 3.5f);
	CU_ASSERT_EQUAL(value(g, "str")->tensor.dtype, RT_DTYPE_STRING);
	CU_ASSERT_EQUAL(value(g, "str")->tensor.dims[0], 2);
	CU_ASSERT_PTR_NULL(value(g, "str")->tensor.data);
	rt_graph_free(g);
}

static void test_typed_field_errors(void)
{
	static const int64_t d2[] = {2};
	Onnx__ModelProto *m;
	Onnx__TensorProto *t;

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "q", BW_DTYPE_INT8, 1, d2);
	PUSH(t->int32_data, t->n_int32_data, 1);
	PUSH(t->int32_data, t->n_int32_data, 200);
	expect_error(m, NULL, "initializer 'q': int32_data[1] = 200 is out of range for int8", false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "f", BW_DTYPE_FLOAT, 1, d2);
	PUSH(t->float_data, t->n_float_data, 1.0f);
	expect_error(m, NULL, "initializer 'f': float_data holds 1 elements, dims need 2", false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "f", BW_DTYPE_FLOAT, 1, d2);
	PUSH(t->int64_data, t->n_int64_data, 1);
	PUSH(t->int64_data, t->n_int64_data, 2);
	expect_error(m, NULL, "initializer 'f': data in a field other than float_data, which type float uses", false);

	m = relu_model(8, 13);
	onnx_build_initializer(m, "f", BW_DTYPE_FLOAT, 1, d2);
	expect_error(m, NULL, "initializer 'f': float_data holds 0 elements, dims need 2 (and there is no raw_data)",
		     false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "c", 14 /* COMPLEX64 */, 1, d2);
	expect_error(m, NULL, "initializer 'c': element type 14 is not supported", false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "u", BW_DTYPE_UINT32, 1, d2);
	PUSH(t->uint64_data, t->n_uint64_data, 1);
	PUSH(t->uint64_data, t->n_uint64_data, UINT64_C(1) << 32);
	expect_error(m, NULL, "out of range for uint32", true);
}

/* ---- node order and structure ------------------------------------------------------------------ */

static void test_reverse_order(void)
{
	static const int64_t dims[] = {4};
	Onnx__ModelProto *m = model_new(8, 13);
	char err[RT_ERR_MAX];

	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "d", "Add", "c,a", "y");
	onnx_build_node(m, "c", "Relu", "b", "c");
	onnx_build_node(m, "b", "Relu", "a", "b");
	onnx_build_node(m, "a", "Relu", "x", "a");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);

	struct rt_graph *g = load_model(m, NULL, err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL_FATAL(g->num_nodes, 4);
	CU_ASSERT_STRING_EQUAL(g->nodes[0].name, "a");
	CU_ASSERT_STRING_EQUAL(g->nodes[1].name, "b");
	CU_ASSERT_STRING_EQUAL(g->nodes[2].name, "c");
	CU_ASSERT_STRING_EQUAL(g->nodes[3].name, "d");
	/* producers follow the new order, and every input comes before its consumer */
	for (uint32_t i = 0; i < g->num_nodes; i++) {
		for (uint16_t k = 0; k < g->nodes[i].num_outputs; k++)
			CU_ASSERT_EQUAL(g->values[g->nodes[i].outputs[k]].producer, (int32_t)i);
		for (uint16_t k = 0; k < g->nodes[i].num_inputs; k++)
			CU_ASSERT(g->values[g->nodes[i].inputs[k]].producer < (int32_t)i);
	}
	rt_graph_free(g);
}

static void test_cycle(void)
{
	static const int64_t dims[] = {4};
	Onnx__ModelProto *m = model_new(8, 13);
	char err[RT_ERR_MAX];

	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "tail", "Relu", "c", "y"); /* downstream of the cycle, not on it */
	onnx_build_node(m, "n_a", "Add", "x,c", "b");
	onnx_build_node(m, "n_b", "Relu", "b", "c");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	CU_ASSERT_PTR_NULL(load_model(m, NULL, err));
	CU_ASSERT_TRUE(strcmp(err, "graph: cycle through node 'n_a' (Add)") == 0 ||
		       strcmp(err, "graph: cycle through node 'n_b' (Relu)") == 0);

	m = model_new(8, 13); /* a node feeding itself */
	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "self", "Add", "x,y", "y");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "graph: cycle through node 'self' (Add)", false);
}

static void test_unknown_input(void)
{
	static const int64_t dims[] = {4};
	Onnx__ModelProto *m = model_new(8, 13);

	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "conv1", "Conv", "x,W", "y");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "node 'conv1' (Conv): input 'W' is neither a graph input, an initializer nor a node output",
		     false);
}

static void test_duplicate_producer(void)
{
	static const int64_t dims[] = {4};
	Onnx__ModelProto *m = model_new(8, 13);

	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "first", "Relu", "x", "y");
	onnx_build_node(m, "second", "Identity", "x", "y");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "value 'y' is produced by both node 'first' (Relu) and node 'second' (Identity)", false);

	m = model_new(8, 13);
	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "over", "Relu", "x", "x");
	onnx_build_output(m, "x", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "node 'over' (Relu): output 'x' is also a graph input", false);
}

static void test_graph_outputs(void)
{
	static const int64_t dims[] = {4};
	Onnx__ModelProto *m = relu_model(8, 13);

	onnx_build_output(m, "nope", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "graph output 'nope' is not produced by any node, nor a graph input or an initializer",
		     false);

	m = model_new(8, 13);
	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "r", "Relu", "x", "y");
	expect_error(m, NULL, "graph: no outputs", false);

	m = model_new(8, 13);
	onnx_build_input(m, "x", BW_DTYPE_FLOAT, -1, NULL); /* rank unknown */
	onnx_build_node(m, "r", "Relu", "x", "y");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "graph input 'x': a tensor without a shape (the runtime needs its rank)", false);

	m = model_new(8, 13);
	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	protobuf_c_message_free_unpacked(&m->graph->input[0]->type->tensor_type->base, NULL);
	m->graph->input[0]->type->value_case = ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE; /* a sequence of tensors */
	m->graph->input[0]->type->sequence_type = NEW(Onnx__TypeProto__Sequence, ONNX__TYPE_PROTO__SEQUENCE__INIT);
	m->graph->input[0]->type->sequence_type->elem_type = onnx_build_type_new(BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "r", "Relu", "x", "y");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "graph input 'x': a sequence; only tensors are supported", false);
}

/* ---- model header -------------------------------------------------------------------------------- */

static void test_versions(void)
{
	char err[RT_ERR_MAX];
	struct rt_graph *g;

	expect_error(relu_model(9, 13), NULL, "model: ir_version 9 is newer than supported (<= 8)", false);
	expect_error(relu_model(2, 13), NULL, "model: ir_version 2 is older than supported (>= 3)", false);
	expect_error(relu_model(8, 18), NULL, "model: opset 18 of the default domain is newer than supported (<= 17)",
		     false);
	expect_error(relu_model(8, 0), NULL, "model: no opset_import for the default ONNX domain", false);

	Onnx__ModelProto *m = relu_model(8, 0);
	onnx_build_opset(m, "com.example", 1);
	expect_error(m, NULL, "model: no opset_import for the default ONNX domain", false);

	m = relu_model(8, 13);
	onnx_build_opset(m, "ai.onnx", 12); /* the default domain under its other name */
	expect_error(m, NULL, "model: opset_import lists domain '' twice", false);

	m = relu_model(8, 0);
	onnx_build_opset(m, "ai.onnx", 14);
	g = load_model(m, NULL, err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_STRING_EQUAL(g->opsets[0].domain, "");
	CU_ASSERT_EQUAL(g->nodes[0].opset, 14);
	rt_graph_free(g);

	m = relu_model(8, 13);
	m->has_ir_version = false;
	expect_error(m, NULL, "model: no ir_version", false);

	m = relu_model(8, 13);
	onnx__graph_proto__free_unpacked(m->graph, NULL);
	m->graph = NULL;
	expect_error(m, NULL, "model: no graph", false);

	/* a node of a domain the model does not import */
	m = relu_model(8, 13);
	m->graph->node[0]->domain = strdup("com.example");
	expect_error(m, NULL, "node 'relu' (Relu): domain 'com.example' is not in the model's opset_import", false);
}

/* ---- broken bytes -------------------------------------------------------------------------------- */

static Onnx__ModelProto *rich_model(void)
{
	static const int64_t dims[] = {-1, 3}, w_dims[] = {3, 3};
	static const float w[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	Onnx__ModelProto *m = model_new(8, 13);
	Onnx__TensorProto *t;
	Onnx__AttributeProto *a;
	Onnx__NodeProto *n;

	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 2, dims);
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 2, w_dims);
	tensor_raw(t, w, sizeof(w));
	n = onnx_build_node(m, "mm", "MatMul", "x,w", "h");
	a = onnx_build_attr(n, "ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	PUSH(a->ints, a->n_ints, 1);
	PUSH(a->ints, a->n_ints, 300);
	onnx_build_node(m, "r", "Relu", "h", "y");
	onnx_build_value_info(m, "h", BW_DTYPE_FLOAT, 2, dims);
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 2, dims);
	return m;
}

static void test_truncated(void)
{
	Onnx__ModelProto *m = rich_model();
	char path[128], err[RT_ERR_MAX];
	size_t len, tries = 0;
	uint8_t *buf = onnx_build_pack(m, &len);
	struct rt_graph *g;

	onnx_build_model_free(m);
	tmp_path(path, sizeof(path), "truncated.onnx");
	for (size_t cut = 0; cut < len; cut += 7, tries++) {
		write_file(path, buf, cut);
		err[0] = '\0';
		g = rt_graph_load(path, err, sizeof(err));
		CU_ASSERT_PTR_NULL(g);
		rt_graph_free(g);
		CU_ASSERT_TRUE(one_line(err));
	}
	/* every length from memory too */
	for (size_t cut = 0; cut < len; cut++) {
		err[0] = '\0';
		g = rt_graph_load_buffer(buf, cut, NULL, err, sizeof(err));
		CU_ASSERT_PTR_NULL(g);
		rt_graph_free(g);
		CU_ASSERT_TRUE(one_line(err));
	}
	write_file(path, buf, len);
	g = rt_graph_load(path, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL(g);
	rt_graph_free(g);
	unlink(path);
	printf("(%zu-byte model cut at %zu offsets) ", len, tries);

	/* one byte flipped at a time: anything but a crash */
	for (size_t i = 0; i < len; i++) {
		for (unsigned int bit = 0; bit < 8; bit += 3) {
			buf[i] ^= (uint8_t)(1u << bit);
			g = rt_graph_load_buffer(buf, len, NULL, err, sizeof(err));
			if (g == NULL)
				CU_ASSERT_TRUE(one_line(err));
			rt_graph_free(g);
			buf[i] ^= (uint8_t)(1u << bit);
		}
	}
	free(buf);
}

static void test_garbage(void)
{
	static const size_t lens[] = {1, 2, 7, 64, 1000, 65536};
	char err[RT_ERR_MAX];
	uint8_t *buf = malloc(65536);
	uint32_t seed = 12345;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		for (int round = 0; round < 20; round++) {
			for (size_t i = 0; i < lens[l]; i++) {
				seed = seed * 1103515245u + 12345u;
				buf[i] = (uint8_t)(seed >> 16);
			}
			struct rt_graph *g = rt_graph_load_buffer(buf, lens[l], NULL, err, sizeof(err));
			CU_ASSERT_PTR_NULL(g);
			rt_graph_free(g);
			CU_ASSERT_TRUE(one_line(err));
		}
	}
	memset(buf, 0xff, 64);
	CU_ASSERT_PTR_NULL(rt_graph_load_buffer(buf, 64, NULL, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err, "model: not a valid ONNX protobuf (truncated or corrupt)");
	CU_ASSERT_PTR_NULL(rt_graph_load_buffer(buf, 0, NULL, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err, "model: no ir_version");
	CU_ASSERT_PTR_NULL(rt_graph_load_buffer(NULL, 0, NULL, err, sizeof(err)));
	CU_ASSERT_PTR_NULL(rt_graph_load_buffer(buf, 64, NULL, NULL, 0)); /* no room for an error: fine */
	CU_ASSERT_PTR_NULL(rt_graph_load("/nonexistent/model.onnx", err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err, "model: cannot open '/nonexistent/model.onnx': No such file or directory");
	CU_ASSERT_PTR_NULL(rt_graph_load(g_tmpdir, err, sizeof(err)));
	CU_ASSERT_TRUE(strstr(err, "is not a regular file") != NULL);
	free(buf);
}

/* Prepends a length-delimited field's tag and length to the len bytes that end at buf + *pos. */
static void wrap_field(uint8_t *buf, size_t *pos, size_t len, unsigned int field)
{
	uint8_t hdr[11];
	size_t n = 0;

	hdr[n++] = (uint8_t)(field << 3 | 2);
	do {
		hdr[n++] = (uint8_t)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
		len >>= 7;
	} while (len != 0);
	*pos -= n;
	memcpy(buf + *pos, hdr, n);
}

/* Subgraphs nested 20000 deep in ~200 KiB: protobuf-c would recurse off the end of the stack. */
static void test_nesting_bomb(void)
{
	size_t cap = 1 << 20, pos = cap;
	uint8_t *buf = malloc(cap);
	char err[RT_ERR_MAX];

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (int i = 0; i < 20000; i++) {
		wrap_field(buf, &pos, cap - pos, 6); /* AttributeProto.g */
		wrap_field(buf, &pos, cap - pos, 5); /* NodeProto.attribute */
		wrap_field(buf, &pos, cap - pos, 1); /* GraphProto.node */
	}
	wrap_field(buf, &pos, cap - pos, 7); /* ModelProto.graph */
	CU_ASSERT_PTR_NULL(rt_graph_load_buffer(buf + pos, cap - pos, NULL, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err, "model: protobuf messages nest deeper than 64 levels");
	free(buf);
}

/* ---- tensor sizes -------------------------------------------------------------------------------- */

static void test_tensor_sizes(void)
{
	static const int64_t d4[] = {4}, neg[] = {-2, 3}, huge[] = {INT64_C(1) << 40, INT64_C(1) << 40};
	static const int64_t big[] = {INT64_C(1) << 30, INT64_C(1) << 20};
	static const int64_t rank9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
	Onnx__ModelProto *m;
	Onnx__TensorProto *t;

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 1, d4);
	tensor_raw(t, "0123456789ab", 12);
	expect_error(m, NULL, "initializer 'w': raw_data holds 12 bytes, dims and type need 16", false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 2, neg);
	expect_error(m, NULL, "initializer 'w': dim 0 is negative (-2)", false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 2, huge);
	tensor_raw(t, "0123", 4);
	expect_error(m, NULL, "initializer 'w': dims overflow (dim 1 = 1099511627776)", false);

	m = relu_model(8, 13); /* 2^50 floats claimed, 4 bytes given: refused before any allocation */
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 2, big);
	tensor_raw(t, "0123", 4);
	expect_error(m, NULL, "initializer 'w': raw_data holds 4 bytes, dims and type need 4503599627370496", false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 9, rank9);
	expect_error(m, NULL, "initializer 'w': rank 9 is above the supported 8", false);

	m = relu_model(8, 13);
	onnx_build_initializer(m, "", BW_DTYPE_FLOAT, 0, NULL);
	expect_error(m, NULL, "initializer 0 has no name", false);

	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 0, NULL);
	PUSH(t->float_data, t->n_float_data, 1.0f);
	t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 0, NULL);
	PUSH(t->float_data, t->n_float_data, 1.0f);
	expect_error(m, NULL, "initializer 'w' is listed twice", false);

	/* a negative dim in a declared shape */
	m = relu_model(8, 13);
	m->graph->input[0]->type->tensor_type->shape->dim[1]->dim_value = -4;
	expect_error(m, NULL, "graph input 'x': dim 1 is negative (-4)", false);

	/* a graph input declared with another type than its initializer */
	m = relu_model(8, 13);
	t = onnx_build_initializer(m, "x2", BW_DTYPE_INT64, 0, NULL);
	PUSH(t->int64_data, t->n_int64_data, 1);
	onnx_build_input(m, "x2", BW_DTYPE_FLOAT, 0, NULL);
	expect_error(m, NULL, "graph input 'x2': declared float, its initializer is int64", false);
}

/* ---- external data ------------------------------------------------------------------------------- */

static Onnx__ModelProto *external_model(const char *location, const char *offset, const char *length)
{
	static const int64_t dims[] = {4};
	Onnx__ModelProto *m = relu_model(8, 13);
	Onnx__TensorProto *t = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 1, dims);

	tensor_external(t, location, offset, length);
	return m;
}

static void test_external_data(void)
{
	static const float w[4] = {1.5f, -2.5f, 3.5f, -4.5f};
	char path[128], other[128], sub[128], err[RT_ERR_MAX];
	uint8_t blob[8 + sizeof(w) + 4];
	struct rt_graph *g;

	memset(blob, 0xee, sizeof(blob));
	memcpy(blob + 8, w, sizeof(w));
	tmp_path(path, sizeof(path), "weights.bin");
	write_file(path, blob, sizeof(blob));
	tmp_path(sub, sizeof(sub), "sub");
	CU_ASSERT_EQUAL(mkdir(sub, 0700), 0);
	tmp_path(path, sizeof(path), "sub/exact.bin");
	write_file(path, w, sizeof(w));

	/* offset and length, loaded from a file next to the model */
	size_t len;
	Onnx__ModelProto *m = external_model("weights.bin", "8", "16");
	uint8_t *buf = onnx_build_pack(m, &len);
	onnx_build_model_free(m);
	tmp_path(path, sizeof(path), "ext.onnx");
	write_file(path, buf, len);
	free(buf);
	g = rt_graph_load(path, err, sizeof(err));
	if (g == NULL)
		printf("\n    %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(value(g, "w")->nbytes, sizeof(w));
	CU_ASSERT_EQUAL(memcmp(value(g, "w")->tensor.data, w, sizeof(w)), 0);
	rt_graph_free(g);
	unlink(path);

	/* no length: the rest of the file, which must be exactly what dims and type need */
	g = load_model(external_model("sub/exact.bin", NULL, NULL), g_tmpdir, err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(memcmp(value(g, "w")->tensor.data, w, sizeof(w)), 0);
	rt_graph_free(g);
	g = load_model(external_model("./sub/../sub/exact.bin", NULL, NULL), g_tmpdir, err);
	CU_ASSERT_PTR_NULL(g); /* ".." refused even when it comes back inside */
	rt_graph_free(g);
	expect_error(external_model("weights.bin", "8", NULL), g_tmpdir,
		     "initializer 'w': external data 'weights.bin' holds 20 bytes from offset 8, dims and type need 16",
		     false);

	expect_error(external_model("weights.bin", "8", "16"), NULL,
		     "initializer 'w': external data 'weights.bin' needs the model's directory (loaded from memory)",
		     false);
	expect_error(external_model("/etc/passwd", NULL, NULL), g_tmpdir,
		     "initializer 'w': external data path '/etc/passwd' is absolute, not relative to the model", false);
	expect_error(external_model("../x", NULL, NULL), g_tmpdir,
		     "initializer 'w': external data path '../x' leaves the model's directory", false);
	expect_error(external_model("sub/../../x", NULL, NULL), g_tmpdir,
		     "initializer 'w': external data path 'sub/../../x' leaves the model's directory", false);

	/* a symlink inside the directory that points out of it */
	snprintf(other, sizeof(other), "%s-outside.bin", g_tmpdir);
	write_file(other, w, sizeof(w));
	tmp_path(path, sizeof(path), "link.bin");
	CU_ASSERT_EQUAL(symlink(other, path), 0);
	expect_error(external_model("link.bin", NULL, NULL), g_tmpdir,
		     "initializer 'w': external data path 'link.bin' resolves outside the model's directory", false);
	tmp_path(path, sizeof(path), "sub/uplink");
	CU_ASSERT_EQUAL(symlink("..", path), 0); /* a directory symlink back into the model's directory is fine */
	g = load_model(external_model("sub/uplink/weights.bin", "8", "16"), g_tmpdir, err);
	CU_ASSERT_PTR_NOT_NULL(g);
	rt_graph_free(g);
	unlink(other);

	expect_error(external_model("missing.bin", NULL, NULL), g_tmpdir,
		     "initializer 'w': external data file 'missing.bin': not found", false);
	expect_error(external_model("weights.bin", "16", "16"), g_tmpdir,
		     "initializer 'w': external data 'weights.bin': offset 16 + 16 bytes runs past its end (28 bytes)",
		     false);
	expect_error(external_model("weights.bin", "18446744073709551615", "16"), g_tmpdir,
		     "initializer 'w': external data 'weights.bin': offset 18446744073709551615 + 16 bytes runs past its "
		     "end (28 bytes)",
		     false);
	expect_error(external_model("weights.bin", "99999999999999999999", "16"), g_tmpdir,
		     "initializer 'w': external data offset is not a byte count", false);
	expect_error(external_model("weights.bin", "-1", "16"), g_tmpdir,
		     "initializer 'w': external data offset is not a byte count", false);
	expect_error(external_model("weights.bin", "0", "12"), g_tmpdir,
		     "initializer 'w': external data length is 12 bytes, dims and type need 16", false);
	expect_error(external_model("sub", NULL, NULL), g_tmpdir,
		     "initializer 'w': external data 'sub' is not a regular file", false);
	expect_error(external_model(NULL, "0", "16"), g_tmpdir, "initializer 'w': external data without a location",
		     false);
}

/* ---- kernels and attributes ---------------------------------------------------------------------- */

static void test_kernels(void)
{
	static const int64_t dims[] = {4};
	char err[RT_ERR_MAX];
	struct rt_graph *g;

	expect_error(relu_model(8, 15), NULL, "node 'relu' (Relu): op Relu at opset 15 is not supported (opsets 6..14 are)",
		     false);
	expect_error(relu_model(8, 5), NULL, "node 'relu' (Relu): op Relu at opset 5 is not supported (opsets 6..14 are)",
		     false);

	Onnx__ModelProto *m = model_new(8, 13);
	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 1, dims);
	onnx_build_node(m, "foo", "Foo", "x", "y");
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "node 'foo' (Foo): op Foo is not supported", false);

	m = relu_model(8, 13);
	onnx_build_opset(m, "com.example", 3);
	m->graph->node[0]->domain = strdup("com.example");
	expect_error(m, NULL, "node 'relu' (Relu): op com.example.Relu is not supported", false);

	/* the check on its own, on a loaded graph and another device */
	g = load_model(relu_model(8, 13), NULL, err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(rt_graph_check_kernels(g, RT_DEVICE_CPU, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(rt_graph_check_kernels(g, RT_DEVICE_GPU, err, sizeof(err)), -ENOTSUP);
	CU_ASSERT_STRING_EQUAL(err, "node 'relu' (Relu): op Relu is not supported");
	rt_graph_free(g);
}

static void test_attribute_errors(void)
{
	static const int64_t dims[] = {4};
	Onnx__ModelProto *m;
	Onnx__NodeProto *n;
	Onnx__AttributeProto *a;

	m = model_new(8, 13);
	onnx_build_input(m, "c", BW_DTYPE_BOOL, 0, NULL);
	n = onnx_build_node(m, "if1", "If", "c", "y");
	a = onnx_build_attr(n, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
	a->g = NEW(Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 1, dims);
	expect_error(m, NULL, "node 'if1' (If): subgraph attributes are not supported (attribute 'then_branch')", false);

	m = relu_model(8, 13);
	a = onnx_build_attr(m->graph->node[0], "k", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a = onnx_build_attr(m->graph->node[0], "k", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	expect_error(m, NULL, "node 'relu' (Relu): attribute 'k' is given twice", false);

	m = relu_model(8, 13);
	a = onnx_build_attr(m->graph->node[0], "sp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR);
	expect_error(m, NULL, "node 'relu' (Relu): attribute 'sp' has type 11, which is not supported", false);

	m = relu_model(8, 13);
	a = onnx_build_attr(m->graph->node[0], "t", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
	a->t = onnx_build_tensor_new(NULL, BW_DTYPE_FLOAT, 1, dims);
	tensor_raw(a->t, "abc", 3);
	expect_error(m, NULL, "node 'relu' (Relu): attribute 't': raw_data holds 3 bytes, dims and type need 16", false);

	m = relu_model(8, 13);
	a = onnx_build_attr(m->graph->node[0], "untyped", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	a->has_type = false;
	expect_error(m, NULL, "node 'relu' (Relu): attribute 'untyped' has no type", false);

	/* control characters from the file do not break the line */
	m = relu_model(8, 13);
	free(m->graph->node[0]->input[0]);
	m->graph->node[0]->input[0] = strdup("bad\nname");
	expect_error(m, NULL, "node 'relu' (Relu): input 'bad?name' is neither a graph input, an initializer nor a node "
			      "output",
		     false);
}

/* ---- a real file --------------------------------------------------------------------------------- */

static const char *testdata_add_cannot_run(void)
{
	return access(TESTDATA_ADD, R_OK) == 0 ? NULL : TESTDATA_ADD " is absent: install libonnx-testdata";
}

/* Runs alone (its own meson test): where libonnx-testdata is not installed, it reports SKIP. */
static void test_onnx_testdata_add(void)
{
	char err[RT_ERR_MAX];
	struct rt_graph *g;

	g = rt_graph_load(TESTDATA_ADD, err, sizeof(err));
	if (g == NULL)
		printf("\n    %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL_FATAL(g->num_inputs, 2);
	CU_ASSERT_EQUAL_FATAL(g->num_outputs, 1);
	CU_ASSERT_EQUAL_FATAL(g->num_nodes, 1);
	CU_ASSERT_STRING_EQUAL(g->nodes[0].op_type, "Add");
	CU_ASSERT(g->nodes[0].opset >= 7 && g->nodes[0].opset <= 17);
	const char *names[] = {"x", "y"};
	for (int i = 0; i < 2; i++) {
		const struct rt_value *v = &g->values[g->inputs[i]];
		CU_ASSERT_STRING_EQUAL(v->name, names[i]);
		CU_ASSERT_EQUAL(v->kind, RT_VALUE_INPUT);
		CU_ASSERT_EQUAL(v->tensor.dtype, BW_DTYPE_FLOAT);
		CU_ASSERT_EQUAL_FATAL(v->tensor.rank, 3);
		CU_ASSERT_EQUAL(v->tensor.dims[0], 3);
		CU_ASSERT_EQUAL(v->tensor.dims[1], 4);
		CU_ASSERT_EQUAL(v->tensor.dims[2], 5);
	}
	const struct rt_value *out = &g->values[g->outputs[0]];
	CU_ASSERT_STRING_EQUAL(out->name, "sum");
	CU_ASSERT_TRUE(out->is_output);
	CU_ASSERT_EQUAL(out->producer, 0);
	CU_ASSERT_EQUAL(out->tensor.dtype, BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL_FATAL(out->tensor.rank, 3);
	CU_ASSERT_EQUAL(out->tensor.dims[2], 5);
	CU_ASSERT_EQUAL(g->nodes[0].inputs[0], g->inputs[0]);
	CU_ASSERT_EQUAL(g->nodes[0].inputs[1], g->inputs[1]);
	rt_graph_free(g);
}

/* ---- suite --------------------------------------------------------------------------------------- */

static int suite_init(void)
{
	snprintf(g_tmpdir, sizeof(g_tmpdir), "/tmp/bw-loader-XXXXXX");
	if (mkdtemp(g_tmpdir) == NULL)
		return -1;
	return rt_kernels_register(g_fake_kernels, sizeof(g_fake_kernels) / sizeof(g_fake_kernels[0])) == 0 ? 0 : -1;
}

static int suite_clean(void)
{
	static const char *const files[] = {"weights.bin", "sub/exact.bin", "sub/uplink", "link.bin", "truncated.onnx",
					    "ext.onnx"};
	char path[128];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		tmp_path(path, sizeof(path), files[i]);
		unlink(path);
	}
	tmp_path(path, sizeof(path), "sub");
	rmdir(path);
	rmdir(g_tmpdir);
	return 0;
}

int main(int argc, char **argv)
{
	static CU_TestInfo tests[] = {
		{"valid graph: values, nodes, attributes, opsets", test_valid_graph},
		{"every element type through its typed field", test_typed_fields},
		{"typed field errors", test_typed_field_errors},
		{"nodes in reverse order come out sorted", test_reverse_order},
		{"a cycle names a node on it", test_cycle},
		{"unknown node input", test_unknown_input},
		{"a value produced twice", test_duplicate_producer},
		{"graph outputs and inputs", test_graph_outputs},
		{"ir_version and opset_import", test_versions},
		{"truncated and bit-flipped files", test_truncated},
		{"garbage bytes", test_garbage},
		{"protobuf nesting bomb", test_nesting_bomb},
		{"tensor sizes: raw_data, negative and huge dims", test_tensor_sizes},
		{"external data confined to the model's directory", test_external_data},
		{"kernel opset ranges and unknown ops", test_kernels},
		{"attribute errors, subgraphs refused", test_attribute_errors},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "loader", .pInitFunc = suite_init, .pCleanupFunc = suite_clean, .pTests = tests},
		CU_SUITE_INFO_NULL,
	};
	static const struct bw_cunit_alone alone[] = {
		{.arg = "testdata-add", .name = "libonnx-testdata test_add", .test = test_onnx_testdata_add,
		 .cannot_run = testdata_add_cannot_run, .init = suite_init, .cleanup = suite_clean},
		{.arg = NULL},
	};

	return bw_cunit_main(argc, argv, suites, alone);
}
