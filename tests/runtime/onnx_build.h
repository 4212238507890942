/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Test support: ONNX models built in memory from the structs protoc-c generates from onnx.proto,
 * then packed to bytes, for tests that feed the loader a model of their own (test_loader, test_opt).
 * Everything is malloc'd, so onnx_build_model_free (onnx__model_proto__free_unpacked) frees a built
 * model. A failed allocation is a fatal CUnit assertion: call these from inside a CUnit test.
 */
#ifndef BATCHWIRE_TESTS_RUNTIME_ONNX_BUILD_H
#define BATCHWIRE_TESTS_RUNTIME_ONNX_BUILD_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../bw_cunit.h"

#include "onnx.pb-c.h"

/* Appends x to the repeated field arr of n elements. */
#define PUSH(arr, n, x)                                                 \
	do {                                                            \
		(arr) = realloc((arr), ((n) + 1) * sizeof(*(arr)));     \
		CU_ASSERT_PTR_NOT_NULL_FATAL(arr);                      \
		(arr)[(n)++] = (x);                                     \
	} while (0)

/* A malloc'd message of type set to init (its generated __INIT). */
#define NEW(type, init)                                                 \
	({                                                              \
		type *p_ = malloc(sizeof(type));                        \
		CU_ASSERT_PTR_NOT_NULL_FATAL(p_);                       \
		*p_ = (type)init;                                       \
		p_;                                                     \
	})

/* A model with one graph "g"; producer NULL: none; opset <= 0: no default-domain opset import. */
Onnx__ModelProto *onnx_build_model_new(const char *producer, int64_t ir_version, int64_t opset);
void onnx_build_model_free(Onnx__ModelProto *m);
void onnx_build_opset(Onnx__ModelProto *m, const char *domain, int64_t version);

/* A tensor type; dims of -1 become dim_param "N", dims of -2 stay unset. rank < 0: no shape at all. */
Onnx__TypeProto *onnx_build_type_new(int32_t dtype, int rank, const int64_t *dims);
Onnx__ValueInfoProto *onnx_build_value_info_new(const char *name, int32_t dtype, int rank, const int64_t *dims);
void onnx_build_input(Onnx__ModelProto *m, const char *name, int32_t dtype, int rank, const int64_t *dims);
void onnx_build_output(Onnx__ModelProto *m, const char *name, int32_t dtype, int rank, const int64_t *dims);
void onnx_build_value_info(Onnx__ModelProto *m, const char *name, int32_t dtype, int rank, const int64_t *dims);

/* A tensor with its name (NULL: none), type and dims, no data. */
Onnx__TensorProto *onnx_build_tensor_new(const char *name, int32_t dtype, size_t rank, const int64_t *dims);
/* The same, appended to the graph's initializers. */
Onnx__TensorProto *onnx_build_initializer(Onnx__ModelProto *m, const char *name, int32_t dtype, size_t rank,
					  const int64_t *dims);

/*
 * A node appended to the graph; name NULL: unnamed. ins and outs: comma-separated names, an empty
 * name between commas an omitted optional one; NULL or "": none.
 */
Onnx__NodeProto *onnx_build_node(Onnx__ModelProto *m, const char *name, const char *op, const char *ins,
				 const char *outs);
/* An attribute of the type, appended to the node, its value left to the caller. */
Onnx__AttributeProto *onnx_build_attr(Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType type);
void onnx_build_attr_int(Onnx__NodeProto *n, const char *name, int64_t v);
void onnx_build_attr_float(Onnx__NodeProto *n, const char *name, float v);
void onnx_build_attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t count);

/* The model's bytes (malloc'd, one spare byte past *len). */
uint8_t *onnx_build_pack(const Onnx__ModelProto *m, size_t *len);

#endif
