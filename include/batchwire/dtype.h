/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Element types: their numbers, sizes and names, for the wire (wire.h includes this), the runtime, the
 * GPU programs and the client alike. Apart from wire.h so that CUDA C++ can include it too (nvcc
 * compiles gpu/program_math.h, which uses these numbers, into device code; wire.h is C only).
 */
#ifndef BATCHWIRE_DTYPE_H
#define BATCHWIRE_DTYPE_H

#include <stddef.h>
#include <stdint.h>

/* The numbering of ONNX's TensorProto.DataType, so users need no second table. */
enum bw_dtype {
	BW_DTYPE_FLOAT = 1,
	BW_DTYPE_UINT8 = 2,
	BW_DTYPE_INT8 = 3,
	BW_DTYPE_UINT16 = 4,
	BW_DTYPE_INT16 = 5,
	BW_DTYPE_INT32 = 6,
	BW_DTYPE_INT64 = 7,
	BW_DTYPE_BOOL = 9,
	BW_DTYPE_FLOAT16 = 10,
	BW_DTYPE_DOUBLE = 11,
	BW_DTYPE_UINT32 = 12,
	BW_DTYPE_UINT64 = 13,
	BW_DTYPE_BFLOAT16 = 16,
};

/* Bytes per element, or 0 for a dtype that v1 does not carry. */
static inline uint32_t bw_dtype_size(uint32_t dtype)
{
	switch (dtype) {
	case BW_DTYPE_UINT8:
	case BW_DTYPE_INT8:
	case BW_DTYPE_BOOL:
		return 1;
	case BW_DTYPE_UINT16:
	case BW_DTYPE_INT16:
	case BW_DTYPE_FLOAT16:
	case BW_DTYPE_BFLOAT16:
		return 2;
	case BW_DTYPE_FLOAT:
	case BW_DTYPE_INT32:
	case BW_DTYPE_UINT32:
		return 4;
	case BW_DTYPE_INT64:
	case BW_DTYPE_DOUBLE:
	case BW_DTYPE_UINT64:
		return 8;
	default:
		return 0;
	}
}

/* The canonical name of a dtype v1 carries ("float", "float16"...: ONNX's, lower case), or NULL. */
static inline const char *bw_dtype_name(uint32_t dtype)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: return "float";
	case BW_DTYPE_UINT8: return "uint8";
	case BW_DTYPE_INT8: return "int8";
	case BW_DTYPE_UINT16: return "uint16";
	case BW_DTYPE_INT16: return "int16";
	case BW_DTYPE_INT32: return "int32";
	case BW_DTYPE_INT64: return "int64";
	case BW_DTYPE_BOOL: return "bool";
	case BW_DTYPE_FLOAT16: return "float16";
	case BW_DTYPE_DOUBLE: return "double";
	case BW_DTYPE_UINT32: return "uint32";
	case BW_DTYPE_UINT64: return "uint64";
	case BW_DTYPE_BFLOAT16: return "bfloat16";
	default: return NULL;
	}
}

#endif /* BATCHWIRE_DTYPE_H */
