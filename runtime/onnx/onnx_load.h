/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the ONNX loader offers beyond graph.h's rt_graph_load / rt_graph_load_buffer / rt_graph_free.
 *
 * What a loaded graph holds (everything malloc'd and owned by the graph):
 * - values: initializers (model order; a graph input that is also an initializer is one of them),
 *   then the other graph inputs (model order), then node outputs (node order of the file).
 * - a value's tensor.dtype != 0 means its dtype, rank and dims are known: from its initializer, its
 *   graph input declaration, or a value_info / graph output entry that has a shape. A declaration
 *   without a shape (rank unknown) is ignored, so dtype 0 and rank 0 mean "not declared": the
 *   planner infers it. dim_param and missing dims are RT_DIM_SYMBOLIC.
 * - initializer data is host-endian; STRING initializers keep their shape with data NULL and
 *   nbytes 0 (never computed). An empty initializer has a non-NULL data pointer.
 * - "ai.onnx" is stored as the default domain "".
 * - node.kernel is left NULL: which kernel runs depends on dtypes the planner infers.
 * - rt_graph_load and rt_graph_load_buffer always end with rt_graph_check_kernels(RT_DEVICE_CPU):
 *   register kernels (rt_cpu_kernels_register, or a test's own) before loading. The registry cannot
 *   say whether it is empty, so an empty one refuses every model rather than letting a graph that
 *   cannot run load.
 * - refused at load: IR versions outside 3..8, default-domain opsets above 17 or a model without one,
 *   subgraph (GRAPH/GRAPHS), sparse and type attributes, sparse initializers, segmented tensors,
 *   nodes without outputs, graph inputs that are not tensors with a shape, files over 2 GiB, and
 *   protobuf messages nested deeper than RT_ONNX_NESTING_MAX (protobuf-c would recurse off the stack).
 */
#ifndef BW_RT_ONNX_LOAD_H
#define BW_RT_ONNX_LOAD_H

#include <stddef.h>

#include "graph.h"

#define RT_ONNX_IR_VERSION_MAX 8   /* ONNX 1.12 (Debian 12's libonnx-dev) */
#define RT_ONNX_IR_VERSION_MIN 3   /* the first IR with opset_import */
#define RT_ONNX_OPSET_MAX 17       /* default domain, ONNX 1.12 */
#define RT_ONNX_FILE_BYTES_MAX (INT64_C(2) << 30) /* protobuf's own 2 GiB limit */
#define RT_ONNX_NESTING_MAX 64     /* protobuf message nesting a model file may have */

/**
 * Checks that a kernel on dev implements every node's op at the node's opset (any dtype: dtypes are
 * the planner's business).
 * \param err  on failure one line naming the node, its op and the registry's reason
 * \return 0, or -ENOTSUP.
 */
int rt_graph_check_kernels(const struct rt_graph *g, enum rt_device dev, char *err, size_t err_cap);

#endif /* BW_RT_ONNX_LOAD_H */
