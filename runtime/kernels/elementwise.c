/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Elementwise kernels over numpy broadcasting (ONNX's multidirectional broadcasting, opset >= 7):
 * Add Sub Mul Div Mod, Pow, the comparisons, And Or Xor, Max Min Sum Mean, Where. One iteration
 * (rt_k_bcast) walks rows of the output; the macros below only spell out the per-type loops.
 * Integer arithmetic wraps (computed unsigned) and division by zero gives 0 instead of a trap.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

enum binop { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_EQ, OP_GT, OP_LT, OP_GE, OP_LE, OP_AND, OP_OR,
	     OP_XOR, OP_MAX, OP_MIN, OP_SUM, OP_MEAN, OP_UNKNOWN };

static enum binop binop_of(const char *op)
{
	static const char *const names[] = {
		[OP_ADD] = "Add", [OP_SUB] = "Sub", [OP_MUL] = "Mul", [OP_DIV] = "Div", [OP_MOD] = "Mod",
		[OP_EQ] = "Equal", [OP_GT] = "Greater", [OP_LT] = "Less", [OP_GE] = "GreaterOrEqual",
		[OP_LE] = "LessOrEqual", [OP_AND] = "And", [OP_OR] = "Or", [OP_XOR] = "Xor", [OP_MAX] = "Max",
		[OP_MIN] = "Min", [OP_SUM] = "Sum", [OP_MEAN] = "Mean",
	};

	for (unsigned int i = 0; i < OP_UNKNOWN; i++) {
		if (strcmp(names[i], op) == 0)
			return (enum binop)i;
	}
	return OP_UNKNOWN;
}

static int64_t sdiv(int64_t x, int64_t y)
{
	if (y == 0)
		return 0;
	if (y == -1)
		return (int64_t)(0 - (uint64_t)x);
	return x / y;
}

static int64_t smod(int64_t x, int64_t y, bool c_fmod)
{
	int64_t r;

	if (y == 0 || y == -1)
		return 0;
	r = x % y;
	if (!c_fmod && r != 0 && ((r < 0) != (y < 0)))
		r += y; /* Python's %: the sign of the divisor */
	return r;
}

static uint64_t udiv(uint64_t x, uint64_t y)
{
	return y == 0 ? 0 : x / y;
}

static uint64_t umod(uint64_t x, uint64_t y)
{
	return y == 0 ? 0 : x % y;
}

/* Infers a broadcast output of n same-typed inputs; out_dtype 0 keeps the input type. */
static int bcast_infer(const struct rt_node *node, const struct rt_tensor *inputs, unsigned int first,
		       unsigned int n, const char *const *names, uint32_t mask, uint8_t out_dtype,
		       struct rt_tensor *out, char *err, size_t err_cap)
{
	const struct rt_tensor *ins[RT_K_BCAST_MAX_IN];
	int rc;

	for (unsigned int k = 0; k < n; k++) {
		rc = rt_k_need_input(node, inputs, first + k, names[k], mask, err, err_cap);
		if (rc < 0)
			return rc;
		if (inputs[first + k].dtype != inputs[first].dtype)
			return bw_err(err, err_cap, -EINVAL, "input '%s' is %s but '%s' is %s", names[k],
				      rt_dtype_name(inputs[first + k].dtype), names[0],
				      rt_dtype_name(inputs[first].dtype));
		ins[k] = &inputs[first + k];
	}
	rc = rt_k_broadcast_shape(ins, names, n, out, err, err_cap);
	if (rc < 0)
		return rc;
	out->dtype = out_dtype != 0 ? out_dtype : inputs[first].dtype;
	return 0;
}

/*
 * Walks the rows of a two-input broadcast; EXPR sees x and y and writes to an OT output. The three
 * row shapes (both contiguous, one side a repeated scalar) get loops of their own so they vectorize.
 */
#define ROW_LOOP(T, OT, EXPR, XI, YI)                                                                        \
	for (int64_t j = 0; j < bc.inner; j++) {                                                             \
		const T x = a[XI], y = c[YI];                                                                \
		o[j] = (OT)(EXPR);                                                                           \
	}
#define ROWS2(T, OT, EXPR)                                                                                   \
	do {                                                                                                 \
		OT *o = outputs[0].data;                                                                     \
		const T *pa = inputs[0].data, *pb = inputs[1].data;                                          \
		for (int64_t r = 0; r < bc.rows; r++, rt_k_bcast_next(&bc), o += bc.inner) {                 \
			const T *a = pa + bc.off[0], *c = pb + bc.off[1];                                    \
			if (bc.step[0] && bc.step[1]) {                                                      \
				ROW_LOOP(T, OT, EXPR, j, j)                                                  \
			} else if (bc.step[0]) {                                                             \
				ROW_LOOP(T, OT, EXPR, j, 0)                                                  \
			} else if (bc.step[1]) {                                                             \
				ROW_LOOP(T, OT, EXPR, 0, j)                                                  \
			} else {                                                                             \
				ROW_LOOP(T, OT, EXPR, 0, 0)                                                  \
			}                                                                                    \
		}                                                                                            \
	} while (0)

#define ARITH_FLOAT(T)                                                                                       \
	switch (op) {                                                                                        \
	case OP_ADD: ROWS2(T, T, x + y); break;                                                              \
	case OP_SUB: ROWS2(T, T, x - y); break;                                                              \
	case OP_MUL: ROWS2(T, T, x * y); break;                                                              \
	case OP_DIV: ROWS2(T, T, x / y); break;                                                              \
	default: ROWS2(T, T, fmod(x, y)); break;                                                             \
	}

#define ARITH_SINT(T)                                                                                        \
	switch (op) {                                                                                        \
	case OP_ADD: ROWS2(T, T, (uint64_t)x + (uint64_t)y); break;                                          \
	case OP_SUB: ROWS2(T, T, (uint64_t)x - (uint64_t)y); break;                                          \
	case OP_MUL: ROWS2(T, T, (uint64_t)x * (uint64_t)y); break;                                          \
	case OP_DIV: ROWS2(T, T, sdiv(x, y)); break;                                                         \
	default: ROWS2(T, T, smod(x, y, c_fmod)); break;                                                     \
	}

#define ARITH_UINT(T)                                                                                        \
	switch (op) {                                                                                        \
	case OP_ADD: ROWS2(T, T, (uint64_t)x + (uint64_t)y); break;                                          \
	case OP_SUB: ROWS2(T, T, (uint64_t)x - (uint64_t)y); break;                                          \
	case OP_MUL: ROWS2(T, T, (uint64_t)x * (uint64_t)y); break;                                          \
	case OP_DIV: ROWS2(T, T, udiv(x, y)); break;                                                         \
	default: ROWS2(T, T, umod(x, y)); break;                                                             \
	}

#define CMP(T)                                                                                               \
	switch (op) {                                                                                        \
	case OP_EQ: ROWS2(T, uint8_t, x == y); break;                                                        \
	case OP_GT: ROWS2(T, uint8_t, x > y); break;                                                         \
	case OP_LT: ROWS2(T, uint8_t, x < y); break;                                                         \
	case OP_GE: ROWS2(T, uint8_t, x >= y); break;                                                        \
	default: ROWS2(T, uint8_t, x <= y); break;                                                           \
	}

/* Runs the switch body MACRO(T) for the C type of dtype; \return -ENOTSUP for other types. */
#define DISPATCH_NUMERIC(dtype, FLOATM, SINTM, UINTM)                                                        \
	switch (dtype) {                                                                                     \
	case BW_DTYPE_FLOAT: FLOATM(float) break;                                                            \
	case BW_DTYPE_DOUBLE: FLOATM(double) break;                                                          \
	case BW_DTYPE_INT8: SINTM(int8_t) break;                                                             \
	case BW_DTYPE_INT16: SINTM(int16_t) break;                                                           \
	case BW_DTYPE_INT32: SINTM(int32_t) break;                                                           \
	case BW_DTYPE_INT64: SINTM(int64_t) break;                                                           \
	case BW_DTYPE_UINT8: UINTM(uint8_t) break;                                                           \
	case BW_DTYPE_UINT16: UINTM(uint16_t) break;                                                         \
	case BW_DTYPE_UINT32: UINTM(uint32_t) break;                                                         \
	case BW_DTYPE_UINT64: UINTM(uint64_t) break;                                                         \
	default: return bw_err(err, err_cap, -ENOTSUP, "type %s is not supported", rt_dtype_name(dtype));    \
	}

static void bcast2(struct rt_k_bcast *bc, const struct rt_tensor *out, const struct rt_tensor *a,
		   const struct rt_tensor *b)
{
	const struct rt_tensor *ins[2] = {a, b};

	rt_k_bcast_init(bc, out, ins, 2);
}

/* ---- Add Sub Mul Div Mod ------------------------------------------------------------------------- */

RT_K_INFER(binary)
{
	static const char *const names[] = {"A", "B"};
	enum binop op = binop_of(node->op_type);
	int64_t c_fmod;
	int rc;

	if (op > OP_MOD)
		return bw_err(err, err_cap, -ENOTSUP, "op %s is not an arithmetic op", node->op_type);
	rc = bcast_infer(node, inputs, 0, 2, names, RT_K_DTYPE_NUMERIC, 0, &outputs[0], err, err_cap);
	if (rc < 0)
		return rc;
	if (op == OP_MOD) {
		rc = rt_k_attr_int(node, "fmod", 0, &c_fmod, err, err_cap);
		if (rc < 0)
			return rc;
		if (c_fmod != 0 && c_fmod != 1)
			return bw_err(err, err_cap, -EINVAL, "attribute 'fmod' must be 0 or 1");
		if (c_fmod == 0 && (RT_DTYPE_BIT(inputs[0].dtype) & RT_K_DTYPE_FLOATS) != 0)
			return bw_err(err, err_cap, -EINVAL,
				      "attribute 'fmod' must be 1 for floating-point inputs");
	}
	return 0;
}

RT_K_RUN(binary)
{
	enum binop op = binop_of(node->op_type);
	bool c_fmod = rt_attr_int(node, "fmod", 0) != 0;
	struct rt_k_bcast bc;

	bcast2(&bc, &outputs[0], &inputs[0], &inputs[1]);
	DISPATCH_NUMERIC(inputs[0].dtype, ARITH_FLOAT, ARITH_SINT, ARITH_UINT)
	return 0;
}

/* ---- Pow ----------------------------------------------------------------------------------------- */

RT_K_INFER(pow)
{
	int rc;
	const struct rt_tensor *ins[2] = {&inputs[0], &inputs[1]};
	static const char *const names[] = {"X", "Y"};

	rc = rt_k_need_input(node, inputs, 0, "X", RT_K_DTYPE_FLOATS | RT_K_DTYPE_SINTS, err, err_cap);
	if (rc == 0)
		rc = rt_k_need_input(node, inputs, 1, "Y", RT_K_DTYPE_NUMERIC, err, err_cap);
	if (rc == 0 && node->opset < 12 && inputs[1].dtype != inputs[0].dtype)
		return bw_err(err, err_cap, -EINVAL, "input 'Y' is %s but 'X' is %s (same type before opset 12)",
			      rt_dtype_name(inputs[1].dtype), rt_dtype_name(inputs[0].dtype));
	if (rc == 0)
		rc = rt_k_broadcast_shape(ins, names, 2, &outputs[0], err, err_cap);
	outputs[0].dtype = inputs[0].dtype;
	return rc;
}

/* An integer power by squaring, wrapping like the other integer ops; negative exponents truncate. */
static int64_t ipow(int64_t x, int64_t y)
{
	uint64_t r = 1, b = (uint64_t)x;

	if (y < 0)
		return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
	while (y > 0) {
		if (y & 1)
			r *= b;
		b *= b;
		y >>= 1;
	}
	return (int64_t)r;
}

static int64_t f64_to_i64(double v)
{
	if (isnan(v))
		return 0;
	if (v >= 9.2233720368547758e18)
		return INT64_MAX;
	if (v <= -9.2233720368547758e18)
		return INT64_MIN;
	return (int64_t)v;
}

RT_K_RUN(pow)
{
	struct rt_k_bcast bc;
	uint8_t xt = inputs[0].dtype, yt = inputs[1].dtype;
	bool y_int = (RT_DTYPE_BIT(yt) & RT_K_DTYPE_INTS) != 0;

	bcast2(&bc, &outputs[0], &inputs[0], &inputs[1]);
	if (xt == BW_DTYPE_FLOAT && yt == BW_DTYPE_FLOAT) {
		ROWS2(float, float, y == 2.0f ? x * x : (float)pow(x, y));
		return 0;
	}
	for (int64_t r = 0, i = 0; r < bc.rows; r++, rt_k_bcast_next(&bc)) {
		for (int64_t j = 0; j < bc.inner; j++, i++) {
			int64_t xi = bc.off[0] + j * bc.step[0], yi = bc.off[1] + j * bc.step[1];
			double y = rt_k_load_f64(inputs[1].data, yt, yi);

			switch (xt) {
			case BW_DTYPE_FLOAT:
				((float *)outputs[0].data)[i] = (float)pow(((const float *)inputs[0].data)[xi], y);
				break;
			case BW_DTYPE_DOUBLE:
				((double *)outputs[0].data)[i] = pow(((const double *)inputs[0].data)[xi], y);
				break;
			default: {
				int64_t x = (int64_t)rt_k_load_f64(inputs[0].data, xt, xi), v;

				if (xt == BW_DTYPE_INT64)
					x = ((const int64_t *)inputs[0].data)[xi];
				if (y_int && yt != BW_DTYPE_UINT64)
					v = ipow(x, yt == BW_DTYPE_INT64 ? ((const int64_t *)inputs[1].data)[yi]
									  : (int64_t)y);
				else
					v = f64_to_i64(pow((double)x, y));
				switch (xt) {
				case BW_DTYPE_INT8: ((int8_t *)outputs[0].data)[i] = (int8_t)v; break;
				case BW_DTYPE_INT16: ((int16_t *)outputs[0].data)[i] = (int16_t)v; break;
				case BW_DTYPE_INT32: ((int32_t *)outputs[0].data)[i] = (int32_t)v; break;
				default: ((int64_t *)outputs[0].data)[i] = v; break;
				}
			}
			}
		}
	}
	return 0;
}

/* ---- Equal Greater Less GreaterOrEqual LessOrEqual ---------------------------------------------- */

RT_K_INFER(compare)
{
	static const char *const names[] = {"A", "B"};
	enum binop op = binop_of(node->op_type);
	uint32_t mask = RT_K_DTYPE_NUMERIC | (op == OP_EQ ? RT_DTYPE_BIT(BW_DTYPE_BOOL) : 0);

	if (op < OP_EQ || op > OP_LE)
		return bw_err(err, err_cap, -ENOTSUP, "op %s is not a comparison", node->op_type);
	return bcast_infer(node, inputs, 0, 2, names, mask, BW_DTYPE_BOOL, &outputs[0], err, err_cap);
}

RT_K_RUN(compare)
{
	enum binop op = binop_of(node->op_type);
	struct rt_k_bcast bc;

	bcast2(&bc, &outputs[0], &inputs[0], &inputs[1]);
	if (inputs[0].dtype == BW_DTYPE_BOOL) {
		ROWS2(uint8_t, uint8_t, (x != 0) == (y != 0));
		return 0;
	}
	DISPATCH_NUMERIC(inputs[0].dtype, CMP, CMP, CMP)
	return 0;
}

/* ---- And Or Xor ---------------------------------------------------------------------------------- */

RT_K_INFER(logical)
{
	static const char *const names[] = {"A", "B"};
	enum binop op = binop_of(node->op_type);

	if (op < OP_AND || op > OP_XOR)
		return bw_err(err, err_cap, -ENOTSUP, "op %s is not a logical op", node->op_type);
	return bcast_infer(node, inputs, 0, 2, names, RT_DTYPE_BIT(BW_DTYPE_BOOL), BW_DTYPE_BOOL, &outputs[0],
			   err, err_cap);
}

RT_K_RUN(logical)
{
	enum binop op = binop_of(node->op_type);
	struct rt_k_bcast bc;

	bcast2(&bc, &outputs[0], &inputs[0], &inputs[1]);
	if (op == OP_AND)
		ROWS2(uint8_t, uint8_t, x != 0 && y != 0);
	else if (op == OP_OR)
		ROWS2(uint8_t, uint8_t, x != 0 || y != 0);
	else
		ROWS2(uint8_t, uint8_t, (x != 0) != (y != 0));
	return 0;
}

/* ---- Max Min Sum Mean (variadic) ----------------------------------------------------------------- */

RT_K_INFER(variadic)
{
	enum binop op = binop_of(node->op_type);
	const struct rt_tensor *ins[RT_K_MAX_INPUTS];
	const char *names[RT_K_MAX_INPUTS];
	uint32_t mask = op == OP_MAX || op == OP_MIN ? RT_K_DTYPE_NUMERIC : RT_K_DTYPE_FLOATS;
	int rc;

	if (op < OP_MAX || op > OP_MEAN)
		return bw_err(err, err_cap, -ENOTSUP, "op %s is not a variadic op", node->op_type);
	if (node->num_inputs < 1 || node->num_inputs > RT_K_MAX_INPUTS)
		return bw_err(err, err_cap, -EINVAL, "%s takes 1 to %d inputs, not %u", node->op_type,
			      RT_K_MAX_INPUTS, node->num_inputs);
	for (unsigned int k = 0; k < node->num_inputs; k++) {
		rc = rt_k_need_input(node, inputs, k, "data_0", mask, err, err_cap);
		if (rc < 0)
			return rc;
		if (inputs[k].dtype != inputs[0].dtype)
			return bw_err(err, err_cap, -EINVAL, "input %u is %s but input 0 is %s", k,
				      rt_dtype_name(inputs[k].dtype), rt_dtype_name(inputs[0].dtype));
		ins[k] = &inputs[k];
		names[k] = "data";
	}
	/* the pairwise shape is the n-ary one; fold so the limit of RT_K_BCAST_MAX_IN does not apply */
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	for (unsigned int k = 1; k < node->num_inputs; k++) {
		const struct rt_tensor *pair[2] = {&outputs[0], ins[k]};
		struct rt_tensor tmp;

		rc = rt_k_broadcast_shape(pair, names, 2, &tmp, err, err_cap);
		if (rc < 0)
			return rc;
		memcpy(outputs[0].dims, tmp.dims, sizeof(tmp.dims));
		outputs[0].rank = tmp.rank;
	}
	outputs[0].dtype = inputs[0].dtype;
	return 0;
}

/* o[j] = OP(o[j], in[...]) with the output itself as the first operand */
#define FOLD(T, EXPR)                                                                                        \
	do {                                                                                                 \
		T *o = outputs[0].data;                                                                      \
		const T *pb = in->data;                                                                      \
		for (int64_t r = 0; r < bc.rows; r++, rt_k_bcast_next(&bc)) {                                \
			const T *c = pb + bc.off[1];                                                         \
			for (int64_t j = 0; j < bc.inner; j++) {                                             \
				const T x = *o, y = c[j * bc.step[1]];                                       \
				*o++ = (T)(EXPR);                                                            \
			}                                                                                    \
		}                                                                                            \
	} while (0)

#define FOLD_ANY(T)                                                                                          \
	switch (op) {                                                                                        \
	case OP_MAX: FOLD(T, (x > y || x != x) ? x : y); break; /* NaN propagates */                        \
	case OP_MIN: FOLD(T, (x < y || x != x) ? x : y); break;                                             \
	default: FOLD(T, x + y); break;                                                                      \
	}

RT_K_RUN(variadic)
{
	enum binop op = binop_of(node->op_type);
	size_t esize = rt_dtype_size(inputs[0].dtype);
	int64_t n = rt_tensor_elems(&outputs[0]);
	struct rt_k_bcast bc;
	int64_t dst_strides[RT_MAX_RANK], src_strides[RT_MAX_RANK];

	/* out = broadcast(input 0) */
	rt_k_strides(&inputs[0], src_strides);
	for (int d = 0; d < outputs[0].rank; d++) {
		int kd = d - (outputs[0].rank - inputs[0].rank);

		dst_strides[d] = kd < 0 || inputs[0].dims[kd] == 1 ? 0 : src_strides[kd];
	}
	rt_k_copy_strided(outputs[0].data, inputs[0].data, outputs[0].rank, outputs[0].dims, dst_strides, esize);
	for (unsigned int k = 1; k < node->num_inputs; k++) {
		const struct rt_tensor *in = &inputs[k];

		bcast2(&bc, &outputs[0], &outputs[0], in);
		DISPATCH_NUMERIC(inputs[0].dtype, FOLD_ANY, FOLD_ANY, FOLD_ANY)
	}
	if (op == OP_MEAN) {
		for (int64_t i = 0; i < n; i++) {
			if (inputs[0].dtype == BW_DTYPE_FLOAT)
				((float *)outputs[0].data)[i] /= (float)node->num_inputs;
			else
				((double *)outputs[0].data)[i] /= (double)node->num_inputs;
		}
	}
	return 0;
}

/* ---- Where --------------------------------------------------------------------------------------- */

RT_K_INFER(where)
{
	static const char *const names[] = {"condition", "X", "Y"};
	const struct rt_tensor *ins[3] = {&inputs[0], &inputs[1], &inputs[2]};
	int rc;

	rc = rt_k_need_input(node, inputs, 0, "condition", RT_DTYPE_BIT(BW_DTYPE_BOOL), err, err_cap);
	if (rc < 0)
		return rc;
	rc = bcast_infer(node, inputs, 1, 2, names + 1, RT_K_DTYPE_ALL, 0, &outputs[0], err, err_cap);
	if (rc < 0)
		return rc;
	return rt_k_broadcast_shape(ins, names, 3, &outputs[0], err, err_cap);
}

#define WHERE_ROWS(T)                                                                                        \
	do {                                                                                                 \
		T *o = outputs[0].data;                                                                      \
		const uint8_t *pc = inputs[0].data;                                                          \
		const T *px = inputs[1].data, *py = inputs[2].data;                                          \
		for (int64_t r = 0; r < bc.rows; r++, rt_k_bcast_next(&bc)) {                                \
			for (int64_t j = 0; j < bc.inner; j++)                                               \
				*o++ = pc[bc.off[0] + j * bc.step[0]] ? px[bc.off[1] + j * bc.step[1]]       \
								      : py[bc.off[2] + j * bc.step[2]];      \
		}                                                                                            \
	} while (0)

RT_K_RUN(where)
{
	const struct rt_tensor *ins[3] = {&inputs[0], &inputs[1], &inputs[2]};
	struct rt_k_bcast bc;

	rt_k_bcast_init(&bc, &outputs[0], ins, 3);
	switch (rt_dtype_size(inputs[1].dtype)) {
	case 1: WHERE_ROWS(uint8_t); break;
	case 2: WHERE_ROWS(uint16_t); break;
	case 4: WHERE_ROWS(uint32_t); break;
	default: WHERE_ROWS(uint64_t); break;
	}
	return 0;
}

/* ---- PRelu --------------------------------------------------------------------------------------- */

/* slope broadcasts to X, never the other way (unidirectional) */
RT_K_INFER(prelu)
{
	static const char *const names[] = {"X", "slope"};
	char a[96], b[96];
	int rc = bcast_infer(node, inputs, 0, 2, names, RT_K_DTYPE_FLOATS, 0, &outputs[0], err, err_cap);

	if (rc < 0)
		return rc;
	if (outputs[0].rank != inputs[0].rank ||
	    memcmp(outputs[0].dims, inputs[0].dims, inputs[0].rank * sizeof(int64_t)) != 0)
		return bw_err(err, err_cap, -EINVAL, "input 'slope' %s does not broadcast to 'X' %s",
			      rt_k_dims_str(&inputs[1], a, sizeof(a)), rt_k_dims_str(&inputs[0], b, sizeof(b)));
	return 0;
}

RT_K_RUN(prelu)
{
	struct rt_k_bcast bc;

	bcast2(&bc, &outputs[0], &inputs[0], &inputs[1]);
	if (inputs[0].dtype == BW_DTYPE_FLOAT)
		ROWS2(float, float, x < 0 ? x * y : x);
	else
		ROWS2(double, double, x < 0 ? x * y : x);
	return 0;
}
