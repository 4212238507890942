/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One-input elementwise kernels (activations and math functions), Not, Clip and Cast. The math is
 * written once with <tgmath.h>, so float tensors use the float functions (expf, erff...) and double
 * tensors the double ones.
 */
#include <string.h>
#include <tgmath.h>

#include "kernels.h"

enum unop {
	U_RELU, U_LEAKY_RELU, U_SIGMOID, U_TANH, U_ERF, U_SQRT, U_EXP, U_LOG, U_ABS, U_NEG, U_RECIPROCAL,
	U_FLOOR, U_CEIL, U_ROUND, U_SIGN, U_SIN, U_COS, U_TAN, U_ASIN, U_ACOS, U_ATAN, U_SINH, U_COSH,
	U_ASINH, U_ACOSH, U_ATANH, U_SOFTPLUS, U_SOFTSIGN, U_ELU, U_SELU, U_CELU, U_HARD_SIGMOID,
	U_HARD_SWISH, U_THRESHOLDED_RELU, U_SHRINK, U_UNKNOWN
};

static const struct {
	const char *name;
	bool ints;           /* also defined on integer tensors */
	const char *alpha;   /* the attribute named alpha, if any, and its default */
	float alpha_dflt;
} g_unops[] = {
	[U_RELU] = {"Relu", true, NULL, 0},
	[U_LEAKY_RELU] = {"LeakyRelu", false, "alpha", 0.01f},
	[U_SIGMOID] = {"Sigmoid", false, NULL, 0},
	[U_TANH] = {"Tanh", false, NULL, 0},
	[U_ERF] = {"Erf", false, NULL, 0},
	[U_SQRT] = {"Sqrt", false, NULL, 0},
	[U_EXP] = {"Exp", false, NULL, 0},
	[U_LOG] = {"Log", false, NULL, 0},
	[U_ABS] = {"Abs", true, NULL, 0},
	[U_NEG] = {"Neg", true, NULL, 0},
	[U_RECIPROCAL] = {"Reciprocal", false, NULL, 0},
	[U_FLOOR] = {"Floor", false, NULL, 0},
	[U_CEIL] = {"Ceil", false, NULL, 0},
	[U_ROUND] = {"Round", false, NULL, 0},
	[U_SIGN] = {"Sign", true, NULL, 0},
	[U_SIN] = {"Sin", false, NULL, 0},
	[U_COS] = {"Cos", false, NULL, 0},
	[U_TAN] = {"Tan", false, NULL, 0},
	[U_ASIN] = {"Asin", false, NULL, 0},
	[U_ACOS] = {"Acos", false, NULL, 0},
	[U_ATAN] = {"Atan", false, NULL, 0},
	[U_SINH] = {"Sinh", false, NULL, 0},
	[U_COSH] = {"Cosh", false, NULL, 0},
	[U_ASINH] = {"Asinh", false, NULL, 0},
	[U_ACOSH] = {"Acosh", false, NULL, 0},
	[U_ATANH] = {"Atanh", false, NULL, 0},
	[U_SOFTPLUS] = {"Softplus", false, NULL, 0},
	[U_SOFTSIGN] = {"Softsign", false, NULL, 0},
	[U_ELU] = {"Elu", false, "alpha", 1.0f},
	[U_SELU] = {"Selu", false, "alpha", 1.67326319217681884765625f},
	[U_CELU] = {"Celu", false, "alpha", 1.0f},
	[U_HARD_SIGMOID] = {"HardSigmoid", false, "alpha", 0.2f},
	[U_HARD_SWISH] = {"HardSwish", false, NULL, 0},
	[U_THRESHOLDED_RELU] = {"ThresholdedRelu", false, "alpha", 1.0f},
	[U_SHRINK] = {"Shrink", false, NULL, 0}, /* lambd and bias: read in run */
};

static enum unop unop_of(const char *op)
{
	for (unsigned int i = 0; i < U_UNKNOWN; i++) {
		if (strcmp(g_unops[i].name, op) == 0)
			return (enum unop)i;
	}
	return U_UNKNOWN;
}

RT_K_INFER(unary)
{
	enum unop op = unop_of(node->op_type);
	uint32_t mask;
	float alpha;
	int rc;

	if (op == U_UNKNOWN)
		return bw_err(err, err_cap, -ENOTSUP, "op %s is not a unary op", node->op_type);
	mask = RT_K_DTYPE_FLOATS | (g_unops[op].ints ? RT_K_DTYPE_INTS : 0);
	if (op == U_NEG || op == U_RELU)
		mask &= ~RT_K_DTYPE_UINTS;
	rc = rt_k_need_input(node, inputs, 0, "X", mask, err, err_cap);
	if (rc < 0)
		return rc;
	if (g_unops[op].alpha != NULL) {
		rc = rt_k_attr_float(node, "alpha", g_unops[op].alpha_dflt, &alpha, err, err_cap);
		if (rc < 0)
			return rc;
		if (op == U_CELU && alpha == 0.0f)
			return bw_err(err, err_cap, -EINVAL, "attribute 'alpha' must not be 0");
	}
	if (op == U_SHRINK && ((rc = rt_k_attr_float(node, "lambd", 0.5f, &alpha, err, err_cap)) < 0 ||
			       (rc = rt_k_attr_float(node, "bias", 0.0f, &alpha, err, err_cap)) < 0))
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

#define MAP(T, EXPR)                                                                                         \
	do {                                                                                                 \
		const T *in = inputs[0].data;                                                                \
		T *o = outputs[0].data;                                                                      \
		for (int64_t i = 0; i < n; i++) {                                                            \
			const T x = in[i];                                                                   \
			o[i] = (T)(EXPR);                                                                    \
		}                                                                                            \
	} while (0)

/* T is float or double; the constants are converted to T so float math stays float. */
#define UNARY_FLOAT(T)                                                                                       \
	do {                                                                                                 \
		const T a = (T)alpha, g = (T)gamma, b = (T)beta, zero = 0, one = 1;                          \
		switch (op) {                                                                                \
		case U_RELU: MAP(T, x > zero ? x : zero); break;                                            \
		case U_LEAKY_RELU: MAP(T, x < zero ? a * x : x); break;                                      \
		case U_SIGMOID: MAP(T, x >= zero ? one / (one + exp(-x)) : exp(x) / (one + exp(x))); break;  \
		case U_TANH: MAP(T, tanh(x)); break;                                                         \
		case U_ERF: MAP(T, erf(x)); break;                                                           \
		case U_SQRT: MAP(T, sqrt(x)); break;                                                         \
		case U_EXP: MAP(T, exp(x)); break;                                                           \
		case U_LOG: MAP(T, log(x)); break;                                                           \
		case U_ABS: MAP(T, fabs(x)); break;                                                          \
		case U_NEG: MAP(T, -x); break;                                                               \
		case U_RECIPROCAL: MAP(T, one / x); break;                                                   \
		case U_FLOOR: MAP(T, floor(x)); break;                                                       \
		case U_CEIL: MAP(T, ceil(x)); break;                                                         \
		case U_ROUND: MAP(T, rint(x)); break; /* half to even, the default rounding mode */         \
		case U_SIGN: MAP(T, x > zero ? one : x < zero ? -one : x); break;                            \
		case U_SIN: MAP(T, sin(x)); break;                                                           \
		case U_COS: MAP(T, cos(x)); break;                                                           \
		case U_TAN: MAP(T, tan(x)); break;                                                           \
		case U_ASIN: MAP(T, asin(x)); break;                                                         \
		case U_ACOS: MAP(T, acos(x)); break;                                                         \
		case U_ATAN: MAP(T, atan(x)); break;                                                         \
		case U_SINH: MAP(T, sinh(x)); break;                                                         \
		case U_COSH: MAP(T, cosh(x)); break;                                                         \
		case U_ASINH: MAP(T, asinh(x)); break;                                                       \
		case U_ACOSH: MAP(T, acosh(x)); break;                                                       \
		case U_ATANH: MAP(T, atanh(x)); break;                                                       \
		case U_SOFTPLUS: MAP(T, x > zero ? x + log1p(exp(-x)) : log1p(exp(x))); break;               \
		case U_SOFTSIGN: MAP(T, x / (one + fabs(x))); break;                                         \
		case U_ELU: MAP(T, x < zero ? a * (exp(x) - one) : x); break;                                \
		case U_SELU: MAP(T, x <= zero ? g * (a * exp(x) - a) : g * x); break;                        \
		case U_CELU: MAP(T, fmax(zero, x) + fmin(zero, a * (exp(x / a) - one))); break;              \
		case U_HARD_SIGMOID: MAP(T, fmax(zero, fmin(one, a * x + b))); break;                        \
		case U_HARD_SWISH: MAP(T, x * fmax(zero, fmin(one, x / (T)6 + (T)0.5))); break;              \
		case U_THRESHOLDED_RELU: MAP(T, x > a ? x : zero); break;                                    \
		case U_SHRINK: MAP(T, x < -a ? x + b : x > a ? x - b : zero); break;                         \
		default: break;                                                                              \
		}                                                                                            \
	} while (0)

#define UNARY_SINT(T)                                                                                        \
	switch (op) {                                                                                        \
	case U_RELU: MAP(T, x > 0 ? x : 0); break;                                                           \
	case U_ABS: MAP(T, x < 0 ? 0 - (uint64_t)x : (uint64_t)x); break;                                    \
	case U_NEG: MAP(T, 0 - (uint64_t)x); break;                                                          \
	default: MAP(T, x > 0 ? 1 : x < 0 ? -1 : 0); break;                                                  \
	}

#define UNARY_UINT(T)                                                                                        \
	switch (op) {                                                                                        \
	case U_SIGN: MAP(T, x > 0 ? 1 : 0); break;                                                           \
	default: MAP(T, x); break;                                                                           \
	}

RT_K_RUN(unary)
{
	enum unop op = unop_of(node->op_type);
	int64_t n = rt_tensor_elems(&inputs[0]);
	float alpha = 0, gamma = 0, beta = 0;

	if (op == U_UNKNOWN)
		return bw_err(err, err_cap, -ENOTSUP, "op %s is not a unary op", node->op_type);
	if (g_unops[op].alpha != NULL)
		alpha = rt_attr_float(node, "alpha", g_unops[op].alpha_dflt);
	if (op == U_SELU)
		gamma = rt_attr_float(node, "gamma", 1.05070102214813232421875f);
	if (op == U_HARD_SIGMOID)
		beta = rt_attr_float(node, "beta", 0.5f);
	if (op == U_SHRINK) {
		alpha = rt_attr_float(node, "lambd", 0.5f);
		beta = rt_attr_float(node, "bias", 0.0f);
	}
	switch (inputs[0].dtype) {
	case BW_DTYPE_FLOAT: UNARY_FLOAT(float); break;
	case BW_DTYPE_DOUBLE: UNARY_FLOAT(double); break;
	case BW_DTYPE_INT8: UNARY_SINT(int8_t); break;
	case BW_DTYPE_INT16: UNARY_SINT(int16_t); break;
	case BW_DTYPE_INT32: UNARY_SINT(int32_t); break;
	case BW_DTYPE_INT64: UNARY_SINT(int64_t); break;
	case BW_DTYPE_UINT8: UNARY_UINT(uint8_t); break;
	case BW_DTYPE_UINT16: UNARY_UINT(uint16_t); break;
	case BW_DTYPE_UINT32: UNARY_UINT(uint32_t); break;
	case BW_DTYPE_UINT64: UNARY_UINT(uint64_t); break;
	default:
		return bw_err(err, err_cap, -ENOTSUP, "type %s is not supported", rt_dtype_name(inputs[0].dtype));
	}
	return 0;
}

/* ---- Not ----------------------------------------------------------------------------------------- */

RT_K_INFER(not)
{
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_BOOL), err, err_cap);

	if (rc < 0)
		return rc;
	outputs[0] = (struct rt_tensor){.dtype = BW_DTYPE_BOOL, .rank = inputs[0].rank, .data = outputs[0].data};
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(not)
{
	int64_t n = rt_tensor_elems(&inputs[0]);

	MAP(uint8_t, !x);
	return 0;
}

/* ---- IsNaN IsInf -------------------------------------------------------------------------------- */

RT_K_INFER(isnan)
{
	int64_t v;
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_K_DTYPE_FLOATS, err, err_cap);

	if (rc < 0 || (rc = rt_k_attr_int(node, "detect_negative", 1, &v, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "detect_positive", 1, &v, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = BW_DTYPE_BOOL;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(isnan)
{
	int64_t n = rt_tensor_elems(&inputs[0]);
	bool inf = strcmp(node->op_type, "IsInf") == 0;
	bool neg = rt_attr_int(node, "detect_negative", 1) != 0, pos = rt_attr_int(node, "detect_positive", 1) != 0;
	uint8_t *o = outputs[0].data;

	for (int64_t i = 0; i < n; i++) {
		double x = inputs[0].dtype == BW_DTYPE_FLOAT ? ((const float *)inputs[0].data)[i]
							     : ((const double *)inputs[0].data)[i];

		o[i] = inf ? isinf(x) && ((x > 0 && pos) || (x < 0 && neg)) : isnan(x);
	}
	return 0;
}

/* ---- Dropout (inference) ------------------------------------------------------------------------- */

/*
 * Dropout is the identity at inference. From opset 12 the ratio and training_mode are inputs; a
 * model that trains (training_mode true, ratio > 0) draws random masks, which is not offered.
 */
RT_K_INFER(dropout)
{
	int rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_FLOATS, err, err_cap);

	if (rc < 0)
		return rc;
	if (node->opset >= 12 && rt_k_has_input(node, inputs, 2)) {
		const struct rt_tensor *t = &inputs[2];
		double ratio = 0.5;

		if (t->dtype != BW_DTYPE_BOOL || rt_tensor_elems(t) != 1)
			return bw_err(err, err_cap, -EINVAL, "input 'training_mode' must be a bool scalar");
		if (t->data == NULL)
			return bw_err(err, err_cap, -ENOTSUP, "input 'training_mode' must be a constant");
		if (rt_k_has_input(node, inputs, 1)) {
			if (rt_tensor_elems(&inputs[1]) != 1 || inputs[1].dtype >= 32 ||
			    (RT_DTYPE_BIT(inputs[1].dtype) & RT_K_DTYPE_FLOATS) == 0)
				return bw_err(err, err_cap, -EINVAL, "input 'ratio' must be a float scalar");
			if (inputs[1].data == NULL)
				return bw_err(err, err_cap, -ENOTSUP, "input 'ratio' must be a constant");
			ratio = rt_k_load_f64(inputs[1].data, inputs[1].dtype, 0);
		}
		if (*(const uint8_t *)t->data != 0 && ratio != 0)
			return bw_err(err, err_cap, -ENOTSUP,
				      "input 'training_mode' true with a ratio > 0 (random masks) is not supported");
	}
	for (unsigned int o = 0; o < 2 && o < node->num_outputs; o++) {
		outputs[o].dtype = o == 0 || node->opset < 10 ? inputs[0].dtype : BW_DTYPE_BOOL;
		outputs[o].rank = inputs[0].rank;
		memcpy(outputs[o].dims, inputs[0].dims, sizeof(outputs[o].dims));
	}
	return 0;
}

RT_K_RUN(dropout)
{
	int64_t n = rt_tensor_elems(&inputs[0]);

	if (outputs[0].data != inputs[0].data)
		memcpy(outputs[0].data, inputs[0].data, (size_t)n * rt_dtype_size(inputs[0].dtype));
	if (rt_k_has_output(node, 1)) { /* nothing dropped: a mask of ones */
		if (outputs[1].dtype == BW_DTYPE_BOOL)
			memset(outputs[1].data, 1, (size_t)n);
		else if (outputs[1].dtype == BW_DTYPE_FLOAT)
			for (int64_t i = 0; i < n; i++)
				((float *)outputs[1].data)[i] = 1.0f;
		else
			for (int64_t i = 0; i < n; i++)
				((double *)outputs[1].data)[i] = 1.0;
	}
	return 0;
}

/* ---- Clip ---------------------------------------------------------------------------------------- */

/* Clip before opset 11 reads min and max from attributes, from 11 on from optional scalar inputs. */
RT_K_INFER(clip)
{
	uint32_t mask = RT_K_DTYPE_FLOATS | (node->opset >= 12 ? RT_K_DTYPE_INTS : 0);
	static const char *const names[] = {"input", "min", "max"};
	float f;
	int rc = rt_k_need_input(node, inputs, 0, "input", mask, err, err_cap);

	if (rc < 0)
		return rc;
	if (node->opset < 11) {
		if ((rc = rt_k_attr_float(node, "min", 0, &f, err, err_cap)) < 0 ||
		    (rc = rt_k_attr_float(node, "max", 0, &f, err, err_cap)) < 0)
			return rc;
	} else {
		for (unsigned int i = 1; i < 3; i++) {
			if (!rt_k_has_input(node, inputs, i))
				continue;
			if (inputs[i].dtype != inputs[0].dtype)
				return bw_err(err, err_cap, -EINVAL, "input '%s' is %s but 'input' is %s", names[i],
					      rt_dtype_name(inputs[i].dtype), rt_dtype_name(inputs[0].dtype));
			if (rt_tensor_elems(&inputs[i]) != 1 || inputs[i].rank > 1)
				return bw_err(err, err_cap, -EINVAL, "input '%s' must be a scalar", names[i]);
		}
	}
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

#define CLIP(T)                                                                                              \
	do {                                                                                                 \
		const T *lo = has_lo ? inputs[1].data : NULL, *hi = has_hi ? inputs[2].data : NULL;          \
		const T l = lo != NULL ? *lo : 0, h = hi != NULL ? *hi : 0;                                  \
		if (lo != NULL && hi != NULL)                                                                \
			MAP(T, x < l ? (l > h ? h : l) : x > h ? h : x);                                     \
		else if (lo != NULL)                                                                         \
			MAP(T, x < l ? l : x);                                                               \
		else if (hi != NULL)                                                                         \
			MAP(T, x > h ? h : x);                                                               \
		else                                                                                         \
			MAP(T, x);                                                                           \
	} while (0)

RT_K_RUN(clip)
{
	int64_t n = rt_tensor_elems(&inputs[0]);
	bool has_lo = rt_k_has_input(node, inputs, 1), has_hi = rt_k_has_input(node, inputs, 2);

	if (node->opset < 11) {
		float l = rt_attr_float(node, "min", -INFINITY), h = rt_attr_float(node, "max", INFINITY);

		if (inputs[0].dtype == BW_DTYPE_FLOAT)
			MAP(float, x < l ? (l > h ? h : l) : x > h ? h : x);
		else
			MAP(double, x < l ? (l > h ? h : l) : x > h ? h : x);
		return 0;
	}
	switch (inputs[0].dtype) {
	case BW_DTYPE_FLOAT: CLIP(float); break;
	case BW_DTYPE_DOUBLE: CLIP(double); break;
	case BW_DTYPE_INT8: CLIP(int8_t); break;
	case BW_DTYPE_INT16: CLIP(int16_t); break;
	case BW_DTYPE_INT32: CLIP(int32_t); break;
	case BW_DTYPE_INT64: CLIP(int64_t); break;
	case BW_DTYPE_UINT8: CLIP(uint8_t); break;
	case BW_DTYPE_UINT16: CLIP(uint16_t); break;
	case BW_DTYPE_UINT32: CLIP(uint32_t); break;
	case BW_DTYPE_UINT64: CLIP(uint64_t); break;
	default:
		return bw_err(err, err_cap, -ENOTSUP, "type %s is not supported", rt_dtype_name(inputs[0].dtype));
	}
	return 0;
}

/* ---- Cast ---------------------------------------------------------------------------------------- */

#define RT_K_DTYPE_CASTABLE (RT_K_DTYPE_ALL)

RT_K_INFER(cast)
{
	int64_t to;
	int rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_CASTABLE, err, err_cap);

	if (rc < 0)
		return rc;
	if (rt_node_attr(node, "to") == NULL)
		return bw_err(err, err_cap, -EINVAL, "attribute 'to' is missing");
	rc = rt_k_attr_int(node, "to", 0, &to, err, err_cap);
	if (rc < 0)
		return rc;
	if (to <= 0 || to >= 32 || (RT_DTYPE_BIT(to) & RT_K_DTYPE_CASTABLE) == 0)
		return bw_err(err, err_cap, to == RT_DTYPE_STRING ? -ENOTSUP : -EINVAL,
			      "attribute 'to' (%lld, %s) is not a supported type", (long long)to,
			      rt_dtype_name((uint8_t)(to > 0 && to < 32 ? to : 0)));
	outputs[0].dtype = (uint8_t)to;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

/* CastLike (15): the type of input 'target_type', whose values are not read */
RT_K_INFER(cast_like)
{
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_CASTABLE, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "target_type", RT_K_DTYPE_CASTABLE, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[1].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

static bool dtype_is_int(uint8_t t)
{
	return (RT_DTYPE_BIT(t) & (RT_K_DTYPE_INTS | RT_DTYPE_BIT(BW_DTYPE_BOOL))) != 0;
}

/* One value in flight: integers stay integers (int64 is not exact in a double). */
struct num {
	bool is_int;
	int64_t i; /* as bits for uint64 */
	double f;
};

static struct num load_num(const void *p, uint8_t t, int64_t k)
{
	switch (t) {
	case BW_DTYPE_INT64: return (struct num){.is_int = true, .i = ((const int64_t *)p)[k]};
	case BW_DTYPE_UINT64: return (struct num){.is_int = true, .i = (int64_t)((const uint64_t *)p)[k]};
	default:
		if (dtype_is_int(t))
			return (struct num){.is_int = true, .i = (int64_t)rt_k_load_f64(p, t, k)};
		return (struct num){.f = rt_k_load_f64(p, t, k)};
	}
}

static int64_t f_to_i(double v)
{
	if (isnan(v))
		return 0;
	if (v >= 9.2233720368547758e18)
		return v < 1.8446744073709552e19 ? (int64_t)(uint64_t)v : INT64_MAX;
	if (v <= -9.2233720368547758e18)
		return INT64_MIN;
	return (int64_t)v;
}

static void store_num(void *p, uint8_t t, int64_t k, struct num v, bool src_u64)
{
	double f = v.is_int ? (src_u64 ? (double)(uint64_t)v.i : (double)v.i) : v.f;
	int64_t i = v.is_int ? v.i : f_to_i(v.f);

	switch (t) {
	case BW_DTYPE_FLOAT:
		((float *)p)[k] = v.is_int ? (src_u64 ? (float)(uint64_t)v.i : (float)v.i) : (float)v.f;
		break;
	case BW_DTYPE_DOUBLE: ((double *)p)[k] = f; break;
	case BW_DTYPE_FLOAT16: ((uint16_t *)p)[k] = bw_float_to_half((float)f); break;
	case BW_DTYPE_BFLOAT16: ((uint16_t *)p)[k] = bw_float_to_bf16((float)f); break;
	case BW_DTYPE_BOOL: ((uint8_t *)p)[k] = v.is_int ? v.i != 0 : v.f != 0; break;
	case BW_DTYPE_INT8: ((int8_t *)p)[k] = (int8_t)i; break;
	case BW_DTYPE_INT16: ((int16_t *)p)[k] = (int16_t)i; break;
	case BW_DTYPE_INT32: ((int32_t *)p)[k] = (int32_t)i; break;
	case BW_DTYPE_INT64: ((int64_t *)p)[k] = i; break;
	case BW_DTYPE_UINT8: ((uint8_t *)p)[k] = (uint8_t)i; break;
	case BW_DTYPE_UINT16: ((uint16_t *)p)[k] = (uint16_t)i; break;
	case BW_DTYPE_UINT32: ((uint32_t *)p)[k] = (uint32_t)i; break;
	default: ((uint64_t *)p)[k] = (uint64_t)i; break;
	}
}

RT_K_RUN(cast)
{
	int64_t n = rt_tensor_elems(&inputs[0]);
	uint8_t from = inputs[0].dtype, to = outputs[0].dtype;

	if (from == to) {
		if (outputs[0].data != inputs[0].data)
			memcpy(outputs[0].data, inputs[0].data, (size_t)n * rt_dtype_size(from));
		return 0;
	}
	for (int64_t k = 0; k < n; k++)
		store_num(outputs[0].data, to, k, load_num(inputs[0].data, from, k), from == BW_DTYPE_UINT64);
	return 0;
}
