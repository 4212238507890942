/* SPDX-License-Identifier: BSD-3-Clause */
/* The ONNX loader's internals, shared by onnx_load.c, onnx_tensor.c and onnx_sort.c. */
#ifndef BW_RT_ONNX_DEFS_H
#define BW_RT_ONNX_DEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "onnx.pb-c.h"

/* Names from the file are quoted with at most this many bytes, so the message keeps its end. */
#define Q "'%.64s'"

/* One load: the graph being built and where errors go. */
struct onnx_ctx {
	struct rt_graph *g;
	char *err;
	size_t err_cap;
	const char *dir;      /* where external data lives; NULL: loaded from memory, refused */
	char *dir_real;       /* realpath(dir), on first use */
	uint32_t map_cap;     /* power of two */
	int32_t *map;         /* value names -> indices, open addressing, -1 empty */
};

/** Formats one line into ctx->err (control characters from the file become '?'). \return -EINVAL */
int onnx_fail(struct onnx_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** The same with an errno to return. */
int onnx_fail_errno(struct onnx_ctx *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/** A protobuf-c string that may be absent. */
static inline const char *onnx_str(const char *s)
{
	return s != NULL ? s : "";
}

/* onnx_tensor.c */

/**
 * Decodes a TensorProto (an initializer or a TENSOR attribute) into t and *nbytes: dims, dtype and
 * data (malloc'd, host-endian) from raw_data, the typed fields or an external file.
 * \param what  names it in errors ("initializer 'w'")
 */
int onnx_tensor_decode(struct onnx_ctx *c, const Onnx__TensorProto *tp, const char *what, struct rt_tensor *t,
		       size_t *nbytes);

/**
 * Reads a TypeProto's tensor dtype and shape into t.
 * \return 1 when it gave a dtype and a shape, 0 when it has no shape or no tensor type (t untouched),
 *         or -EINVAL for an unsupported element type, a rank above RT_MAX_RANK or a negative dim.
 */
int onnx_type_read(struct onnx_ctx *c, const Onnx__TypeProto *tp, const char *what, struct rt_tensor *t);

/* onnx_sort.c */

/** Puts g->nodes in topological order (smallest file index first among ready nodes). */
int onnx_sort_nodes(struct onnx_ctx *c);

/**
 * Checks that no protobuf message in buf nests deeper than RT_ONNX_NESTING_MAX: protobuf-c unpacks
 * nested messages recursively, and a small file of deeply nested subgraphs would exhaust the stack.
 * Only the wire format's framing is read, against protobuf-c's generated descriptors.
 */
int onnx_check_nesting(struct onnx_ctx *c, const uint8_t *buf, size_t len);

#endif /* BW_RT_ONNX_DEFS_H */
