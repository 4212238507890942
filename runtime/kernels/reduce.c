/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
 * ReduceLogSum, ReduceLogSumExp, ReduceSumSquare), ArgMax/ArgMin and the softmax family (Softmax,
 * LogSoftmax, Hardmax). Reductions walk the input once with the output broadcast over the reduced
 * axes (stride 0) and accumulate in double (floats) or int64 (integers) in scratch, so float sums
 * do not lose precision in long rows.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

enum redop { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LOGSUM, R_LOGSUMEXP, R_SUMSQUARE, R_UNKNOWN };

static enum redop redop_of(const char *op)
{
	static const char *const names[] = {
		[R_SUM] = "ReduceSum", [R_MEAN] = "ReduceMean", [R_MAX] = "ReduceMax", [R_MIN] = "ReduceMin",
		[R_PROD] = "ReduceProd", [R_L1] = "ReduceL1", [R_L2] = "ReduceL2", [R_LOGSUM] = "ReduceLogSum",
		[R_LOGSUMEXP] = "ReduceLogSumExp", [R_SUMSQUARE] = "ReduceSumSquare",
	};

	for (unsigned int i = 0; i < R_UNKNOWN; i++) {
		if (strcmp(names[i], op) == 0)
			return (enum redop)i;
	}
	return R_UNKNOWN;
}

/* Which axes a reduction reduces: axes moved to an input at opset 13 for ReduceSum, 18 for the rest. */
struct red_plan {
	bool reduce[RT_MAX_RANK];
	bool noop;            /* empty axes with noop_with_empty_axes: a copy */
	int64_t keepdims;
};

static int red_plan(const struct rt_node *node, const struct rt_tensor *inputs, struct red_plan *p, char *err,
		    size_t err_cap)
{
	int64_t axes[RT_MAX_RANK], noop = 0;
	int64_t since = strcmp(node->op_type, "ReduceSum") == 0 ? 13 : 18;
	unsigned int n;
	int rank = inputs[0].rank, rc;

	memset(p, 0, sizeof(*p));
	if ((rc = rt_k_attr_int(node, "keepdims", 1, &p->keepdims, err, err_cap)) < 0)
		return rc;
	if (node->opset >= since && (rc = rt_k_attr_int(node, "noop_with_empty_axes", 0, &noop, err, err_cap)) < 0)
		return rc;
	rc = rt_k_ints_attr_or_input(node, inputs, "axes", 1, since, axes, RT_MAX_RANK, &n, err, err_cap);
	if (rc < 0)
		return rc;
	if ((rc = rt_k_axes(axes, n, rank, "'axes'", err, err_cap)) < 0)
		return rc;
	if (n == 0 && noop != 0) {
		p->noop = true;
		return 0;
	}
	for (int d = 0; d < rank; d++)
		p->reduce[d] = n == 0;
	for (unsigned int i = 0; i < n; i++)
		p->reduce[axes[i]] = true;
	return 0;
}

RT_K_INFER(reduce)
{
	enum redop op = redop_of(node->op_type);
	uint32_t mask = RT_K_DTYPE_FLOATS;
	struct red_plan p;
	int rc, r = 0;

	if (op == R_UNKNOWN)
		return bw_err(err, err_cap, -ENOTSUP, "op %s is not a reduction", node->op_type);
	if (op != R_L2 && op != R_LOGSUM && op != R_LOGSUMEXP)
		mask |= RT_DTYPE_BIT(BW_DTYPE_INT32) | RT_DTYPE_BIT(BW_DTYPE_INT64);
	if ((rc = rt_k_need_input(node, inputs, 0, "data", mask, err, err_cap)) < 0 ||
	    (rc = red_plan(node, inputs, &p, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	for (int d = 0; d < inputs[0].rank; d++) {
		if (!p.noop && p.reduce[d] && !p.keepdims)
			continue;
		outputs[0].dims[r++] = !p.noop && p.reduce[d] ? 1 : inputs[0].dims[d];
	}
	outputs[0].rank = (uint8_t)r;
	return 0;
}

RT_K_SCRATCH(reduce)
{
	return 2 * sizeof(double) * (size_t)rt_tensor_elems(&outputs[0]);
}

/* One pass over data; ACC a[] at the output offset, x the element. */
#define RED_PASS(T, ACC, acc, STMT)                                                                          \
	do {                                                                                                 \
		const T *px = in->data;                                                                      \
		struct rt_k_bcast bc;                                                                        \
		rt_k_bcast_init(&bc, in, ins, 2);                                                            \
		for (int64_t r = 0; r < bc.rows; r++, rt_k_bcast_next(&bc)) {                                \
			const T *xs = px + bc.off[0];                                                        \
			ACC *as = (acc) + bc.off[1];                                                         \
			for (int64_t j = 0; j < bc.inner; j++) {                                             \
				const ACC x = (ACC)xs[j * bc.step[0]];                                       \
				ACC *a = &as[j * bc.step[1]];                                                \
				STMT;                                                                        \
			}                                                                                    \
		}                                                                                            \
	} while (0)

#define RED_FLOAT(T)                                                                                         \
	do {                                                                                                 \
		double *acc = scratch, *acc2 = acc + nout;                                                   \
		double init = op == R_MAX || op == R_LOGSUMEXP ? -INFINITY : op == R_MIN ? INFINITY           \
			      : op == R_PROD ? 1.0 : 0.0;                                                    \
		T *o = outputs[0].data;                                                                      \
		for (int64_t i = 0; i < nout; i++)                                                           \
			acc[i] = init, acc2[i] = 0;                                                          \
		switch (op) {                                                                                \
		case R_MAX: RED_PASS(T, double, acc, if (x > *a || x != x) *a = x); break;                   \
		case R_MIN: RED_PASS(T, double, acc, if (x < *a || x != x) *a = x); break;                   \
		case R_PROD: RED_PASS(T, double, acc, *a *= x); break;                                      \
		case R_L1: RED_PASS(T, double, acc, *a += fabs(x)); break;                                  \
		case R_L2:                                                                                   \
		case R_SUMSQUARE: RED_PASS(T, double, acc, *a += x * x); break;                             \
		case R_LOGSUMEXP:                                                                            \
			RED_PASS(T, double, acc, if (x > *a) *a = x);                                        \
			RED_PASS(T, double, acc2, *a += exp(x - acc[a - acc2]));                             \
			break;                                                                               \
		default: RED_PASS(T, double, acc, *a += x); break;                                          \
		}                                                                                            \
		for (int64_t i = 0; i < nout; i++) {                                                         \
			double v = acc[i];                                                                   \
			switch (op) {                                                                        \
			case R_MEAN: v /= (double)count; break;                                              \
			case R_L2: v = sqrt(v); break;                                                       \
			case R_LOGSUM: v = log(v); break;                                                    \
			case R_LOGSUMEXP: v = isinf(v) ? v : v + log(acc2[i]); break;                       \
			default: break;                                                                      \
			}                                                                                    \
			o[i] = (T)v;                                                                         \
		}                                                                                            \
	} while (0)

/* integers wrap like the elementwise ops: accumulate unsigned */
#define RED_INT(T)                                                                                           \
	do {                                                                                                 \
		int64_t *acc = scratch;                                                                      \
		int64_t init = op == R_MAX ? INT64_MIN : op == R_MIN ? INT64_MAX : op == R_PROD ? 1 : 0;     \
		T *o = outputs[0].data;                                                                      \
		for (int64_t i = 0; i < nout; i++)                                                           \
			acc[i] = init;                                                                       \
		switch (op) {                                                                                \
		case R_MAX: RED_PASS(T, int64_t, acc, if (x > *a) *a = x); break;                            \
		case R_MIN: RED_PASS(T, int64_t, acc, if (x < *a) *a = x); break;                            \
		case R_PROD: RED_PASS(T, int64_t, acc, *a = (int64_t)((uint64_t)*a * (uint64_t)x)); break;  \
		case R_L1: RED_PASS(T, int64_t, acc, *a = (int64_t)((uint64_t)*a + (x < 0 ? 0 - (uint64_t)x : (uint64_t)x))); \
			break;                                                                               \
		case R_SUMSQUARE:                                                                            \
			RED_PASS(T, int64_t, acc, *a = (int64_t)((uint64_t)*a + (uint64_t)x * (uint64_t)x)); \
			break;                                                                               \
		default: RED_PASS(T, int64_t, acc, *a = (int64_t)((uint64_t)*a + (uint64_t)x)); break;      \
		}                                                                                            \
		for (int64_t i = 0; i < nout; i++)                                                           \
			o[i] = (T)(op == R_MEAN ? (count ? acc[i] / count : 0) : acc[i]);                    \
	} while (0)

RT_K_RUN(reduce)
{
	enum redop op = redop_of(node->op_type);
	const struct rt_tensor *in = &inputs[0];
	struct rt_tensor kept = *in;
	const struct rt_tensor *ins[2] = {in, &kept};
	int64_t nout = rt_tensor_elems(&outputs[0]), count = 1;
	struct red_plan p;
	int rc = red_plan(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (p.noop) {
		if (outputs[0].data != in->data)
			memcpy(outputs[0].data, in->data, (size_t)nout * rt_dtype_size(in->dtype));
		return 0;
	}
	/* the output seen with the input's rank: reduced axes are 1 and broadcast */
	for (int d = 0; d < in->rank; d++) {
		if (p.reduce[d]) {
			count *= in->dims[d];
			kept.dims[d] = 1;
		}
	}
	switch (in->dtype) {
	case BW_DTYPE_FLOAT: RED_FLOAT(float); break;
	case BW_DTYPE_DOUBLE: RED_FLOAT(double); break;
	case BW_DTYPE_INT32: RED_INT(int32_t); break;
	case BW_DTYPE_INT64: RED_INT(int64_t); break;
	default:
		return bw_err(err, err_cap, -ENOTSUP, "type %s is not supported", rt_dtype_name(in->dtype));
	}
	return 0;
}

/* ---- Softmax LogSoftmax Hardmax ------------------------------------------------------------------ */

/*
 * Softmax before opset 13 coerces the input to 2-D at axis (default 1) and normalizes whole rows;
 * from 13 on it normalizes along the one axis (default -1). Either way: outer x n x inner lanes.
 */
static int softmax_lanes(const struct rt_node *node, const struct rt_tensor *in, int64_t *outer, int64_t *n,
			 int64_t *inner, char *err, size_t err_cap)
{
	int64_t axis;
	int rc;

	if ((rc = rt_k_attr_int(node, "axis", node->opset >= 13 ? -1 : 1, &axis, err, err_cap)) < 0)
		return rc;
	if (node->opset < 13) {
		/* coercion accepts axis == rank: one row of everything */
		if (axis < -(int64_t)in->rank || axis > in->rank)
			return bw_err(err, err_cap, -EINVAL, "attribute 'axis' %" PRId64 " is out of range for rank %u",
				      axis, in->rank);
		if (axis < 0)
			axis += in->rank;
		*outer = rt_k_dims_prod(in, 0, (int)axis);
		*n = rt_k_dims_prod(in, (int)axis, in->rank);
		*inner = 1;
		return 0;
	}
	if ((rc = rt_k_axis(axis, in->rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	*outer = rt_k_dims_prod(in, 0, (int)axis);
	*n = in->dims[axis];
	*inner = rt_k_dims_prod(in, (int)axis + 1, in->rank);
	return 0;
}

RT_K_INFER(softmax)
{
	int64_t outer = 0, n = 0, inner = 0; /* set by softmax_lanes; initialised for gcc -O2's flow analysis */
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_FLOATS, err, err_cap)) < 0 ||
	    (rc = softmax_lanes(node, &inputs[0], &outer, &n, &inner, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

#define SOFTMAX(T)                                                                                           \
	do {                                                                                                 \
		const T *px = inputs[0].data;                                                                \
		T *py = outputs[0].data;                                                                     \
		for (int64_t o = 0; o < outer; o++) {                                                        \
			for (int64_t l = 0; l < inner; l++) {                                                \
				const T *x = px + o * n * inner + l;                                         \
				T *y = py + o * n * inner + l;                                               \
				T mx = x[0];                                                                 \
				int64_t arg = 0;                                                             \
				double sum = 0;                                                              \
				for (int64_t k = 1; k < n; k++) {                                            \
					if (x[k * inner] > mx) {                                             \
						mx = x[k * inner];                                           \
						arg = k;                                                     \
					}                                                                    \
				}                                                                            \
				if (kind == 'H') {                                                           \
					for (int64_t k = 0; k < n; k++)                                      \
						y[k * inner] = k == arg ? 1 : 0;                             \
					continue;                                                            \
				}                                                                            \
				for (int64_t k = 0; k < n; k++) {                                            \
					T e = (T)exp(x[k * inner] - mx);                                     \
					sum += e;                                                            \
					if (kind == 'S')                                                     \
						y[k * inner] = e;                                            \
				}                                                                            \
				if (kind == 'S') {                                                           \
					T inv = (T)(1.0 / sum);                                              \
					for (int64_t k = 0; k < n; k++)                                      \
						y[k * inner] *= inv;                                         \
				} else {                                                                     \
					T lse = (T)log(sum);                                                 \
					for (int64_t k = 0; k < n; k++)                                      \
						y[k * inner] = x[k * inner] - mx - lse;                      \
				}                                                                            \
			}                                                                                    \
		}                                                                                            \
	} while (0)

RT_K_RUN(softmax)
{
	int64_t outer = 0, n = 0, inner = 0; /* set by softmax_lanes; initialised for gcc -O2's flow analysis */
	char kind = node->op_type[0] == 'L' ? 'L' : node->op_type[0] == 'H' ? 'H' : 'S';
	int rc = softmax_lanes(node, &inputs[0], &outer, &n, &inner, err, err_cap);

	if (rc < 0)
		return rc;
	if (n == 0)
		return 0;
	if (inputs[0].dtype == BW_DTYPE_FLOAT)
		SOFTMAX(float);
	else
		SOFTMAX(double);
	return 0;
}

/* ---- ArgMax ArgMin ------------------------------------------------------------------------------- */

RT_K_INFER(argminmax)
{
	int64_t axis, keepdims, last;
	int rc, r = 0;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_NUMERIC, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "axis", 0, &axis, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "keepdims", 1, &keepdims, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "select_last_index", 0, &last, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(axis, inputs[0].rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	if (inputs[0].dims[axis] == 0)
		return bw_err(err, err_cap, -EINVAL, "input 'data' is empty along axis %" PRId64, axis);
	for (int d = 0; d < inputs[0].rank; d++) {
		if (d == axis && !keepdims)
			continue;
		outputs[0].dims[r++] = d == axis ? 1 : inputs[0].dims[d];
	}
	outputs[0].rank = (uint8_t)r;
	outputs[0].dtype = BW_DTYPE_INT64;
	return 0;
}

RT_K_RUN(argminmax)
{
	const struct rt_tensor *in = &inputs[0];
	int64_t axis = rt_attr_int(node, "axis", 0), outer, n, inner;
	bool last = rt_attr_int(node, "select_last_index", 0) != 0, is_max = strcmp(node->op_type, "ArgMax") == 0;
	int64_t *y = outputs[0].data;

	if (axis < 0)
		axis += in->rank;
	outer = rt_k_dims_prod(in, 0, (int)axis);
	n = in->dims[axis];
	inner = rt_k_dims_prod(in, (int)axis + 1, in->rank);
	for (int64_t o = 0; o < outer; o++) {
		for (int64_t l = 0; l < inner; l++) {
			int64_t base = o * n * inner + l, arg = 0;
			double best = rt_k_load_f64(in->data, in->dtype, base);

			for (int64_t k = 1; k < n; k++) {
				double v = rt_k_load_f64(in->data, in->dtype, base + k * inner);
				bool better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);

				if (better) {
					best = v;
					arg = k;
				}
			}
			y[o * inner + l] = arg;
		}
	}
	return 0;
}

/* ---- CumSum -------------------------------------------------------------------------------------- */

/* The axis is a tensor input: read when known at load, and again at run. */
static int cumsum_axis(const struct rt_tensor *inputs, int64_t *axis, char *err, size_t err_cap)
{
	const struct rt_tensor *a = &inputs[1];

	if ((a->dtype != BW_DTYPE_INT64 && a->dtype != BW_DTYPE_INT32) || rt_tensor_elems(a) != 1 || a->rank > 1)
		return bw_err(err, err_cap, -EINVAL, "input 'axis' must be an int32 or int64 scalar");
	if (a->data == NULL)
		return 1;
	*axis = a->dtype == BW_DTYPE_INT64 ? *(const int64_t *)a->data : *(const int32_t *)a->data;
	return rt_k_axis(*axis, inputs[0].rank, "input 'axis'", axis, err, err_cap);
}

RT_K_INFER(cumsum)
{
	int64_t axis, v;
	uint32_t mask = RT_K_DTYPE_FLOATS | RT_K_DTYPE_INDEX;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "x", mask, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "axis", RT_K_DTYPE_INDEX, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "exclusive", 0, &v, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "reverse", 0, &v, err, err_cap)) < 0 ||
	    (rc = cumsum_axis(inputs, &axis, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

#define CUMSUM(T, ACC)                                                                                       \
	do {                                                                                                 \
		const T *px = x->data;                                                                       \
		T *py = outputs[0].data;                                                                     \
		for (int64_t o = 0; o < outer; o++) {                                                        \
			for (int64_t l = 0; l < inner; l++) {                                                \
				ACC acc = 0;                                                                 \
				for (int64_t k = 0; k < n; k++) {                                            \
					int64_t i = o * n * inner + (reverse ? n - 1 - k : k) * inner + l;     \
					if (exclusive) {                                                     \
						py[i] = (T)acc;                                              \
						acc += (ACC)px[i];                                           \
					} else {                                                             \
						acc += (ACC)px[i];                                           \
						py[i] = (T)acc;                                              \
					}                                                                    \
				}                                                                            \
			}                                                                                    \
		}                                                                                            \
	} while (0)

RT_K_RUN(cumsum)
{
	const struct rt_tensor *x = &inputs[0];
	bool exclusive = rt_attr_int(node, "exclusive", 0) != 0, reverse = rt_attr_int(node, "reverse", 0) != 0;
	int64_t axis = 0, outer, n, inner;
	int rc = cumsum_axis(inputs, &axis, err, err_cap);

	if (rc != 0)
		return rc < 0 ? rc : bw_err(err, err_cap, -EINVAL, "input 'axis' has no data");
	outer = rt_k_dims_prod(x, 0, (int)axis);
	n = x->dims[axis];
	inner = rt_k_dims_prod(x, (int)axis + 1, x->rank);
	switch (x->dtype) {
	case BW_DTYPE_FLOAT: CUMSUM(float, double); break;
	case BW_DTYPE_DOUBLE: CUMSUM(double, double); break;
	case BW_DTYPE_INT32: CUMSUM(int32_t, uint64_t); break; /* wraps */
	default: CUMSUM(int64_t, uint64_t); break;
	}
	return 0;
}
