/* SPDX-License-Identifier: BSD-3-Clause */
/* BatchNormalization (inference: running statistics) and LayerNormalization (opset 17). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

/* ---- BatchNormalization -------------------------------------------------------------------------- */

RT_K_INFER(batchnorm)
{
	static const char *const names[] = {"X", "scale", "B", "input_mean", "input_var"};
	int64_t training = 0, spatial = 1, channels;
	float eps;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "epsilon", 1e-5f, &eps, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "training_mode", 0, &training, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "spatial", 1, &spatial, err, err_cap)) < 0)
		return rc;
	if (training != 0)
		return bw_err(err, err_cap, -ENOTSUP, "attribute 'training_mode' 1 is not supported (inference only)");
	if (spatial != 1)
		return bw_err(err, err_cap, -ENOTSUP, "attribute 'spatial' 0 is not supported");
	if (node->num_outputs > 1 && rt_k_has_output(node, 1))
		return bw_err(err, err_cap, -ENOTSUP, "training outputs (running mean, var) are not supported");
	if (inputs[0].rank < 2)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must have rank >= 2, has %u", inputs[0].rank);
	channels = inputs[0].dims[1];
	for (unsigned int i = 1; i < 5; i++) {
		if ((rc = rt_k_need_input(node, inputs, i, names[i], RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0)
			return rc;
		if (inputs[i].rank != 1 || (channels >= 0 && inputs[i].dims[0] >= 0 && inputs[i].dims[0] != channels))
			return bw_err(err, err_cap, -EINVAL, "input '%s' must be 1-D of %" PRId64 " channels", names[i],
				      channels);
	}
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(batchnorm)
{
	const struct rt_tensor *x = &inputs[0];
	const float *scale = inputs[1].data, *bias = inputs[2].data, *mean = inputs[3].data, *var = inputs[4].data;
	const float *px = x->data;
	float *py = outputs[0].data;
	float eps = rt_attr_float(node, "epsilon", 1e-5f);
	int64_t n = x->dims[0], c = x->dims[1], inner = rt_k_dims_prod(x, 2, x->rank);

	for (int64_t b = 0; b < n; b++) {
		for (int64_t ch = 0; ch < c; ch++) {
			float a = scale[ch] / sqrtf(var[ch] + eps), s = bias[ch] - mean[ch] * a;
			const float *xs = px + (b * c + ch) * inner;
			float *ys = py + (b * c + ch) * inner;

			for (int64_t i = 0; i < inner; i++)
				ys[i] = xs[i] * a + s;
		}
	}
	return 0;
}

/* ---- LayerNormalization -------------------------------------------------------------------------- */

/* Scale and B cover the normalized dims (or are one element): a broadcast of what remains. */
static int layernorm_param(const struct rt_node *node, const struct rt_tensor *inputs, unsigned int i,
			   const char *name, int64_t inner, char *err, size_t err_cap)
{
	int64_t n;
	int rc = rt_k_need_input(node, inputs, i, name, RT_DTYPE_BIT(inputs[0].dtype), err, err_cap);

	if (rc < 0)
		return rc;
	n = rt_tensor_elems(&inputs[i]);
	if (n != inner && n != 1 && n >= 0 && inner >= 0)
		return bw_err(err, err_cap, -EINVAL, "input '%s' has %" PRId64 " elements, the normalized dims %" PRId64,
			      name, n, inner);
	return 0;
}

RT_K_INFER(layernorm)
{
	int64_t axis, stash;
	float eps;
	const struct rt_tensor *x = &inputs[0];
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_K_DTYPE_FLOATS, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "axis", -1, &axis, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "epsilon", 1e-5f, &eps, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "stash_type", 1, &stash, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(axis, x->rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	if ((rc = layernorm_param(node, inputs, 1, "Scale", rt_k_dims_prod(x, (int)axis, x->rank), err, err_cap)) < 0)
		return rc;
	if (rt_k_has_input(node, inputs, 2) &&
	    (rc = layernorm_param(node, inputs, 2, "B", rt_k_dims_prod(x, (int)axis, x->rank), err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = x->dtype;
	outputs[0].rank = x->rank;
	memcpy(outputs[0].dims, x->dims, sizeof(outputs[0].dims));
	/* Mean and InvStdDev: X's shape with the normalized dims set to 1, in float (stash_type) */
	for (unsigned int o = 1; o < 3 && o < node->num_outputs; o++) {
		outputs[o].dtype = BW_DTYPE_FLOAT;
		outputs[o].rank = x->rank;
		for (int d = 0; d < x->rank; d++)
			outputs[o].dims[d] = d < axis ? x->dims[d] : 1;
	}
	return 0;
}

/* Mean and population variance of n contiguous values, accumulated in double (Layer- and
 * InstanceNormalization normalise rows the same way). */
#define ROW_MEAN_VAR(xs, n, mean, var)                                                                       \
	do {                                                                                                 \
		for (int64_t i_ = 0; i_ < (n); i_++)                                                         \
			(mean) += (xs)[i_];                                                                  \
		(mean) /= (double)(n);                                                               \
		for (int64_t i_ = 0; i_ < (n); i_++)                                                         \
			(var) += ((double)(xs)[i_] - (mean)) * ((double)(xs)[i_] - (mean));                  \
		(var) /= (double)(n);                                                                \
	} while (0)

#define LAYERNORM(T)                                                                                         \
	do {                                                                                                 \
		const T *px = x->data, *sc = inputs[1].data, *bi = has_b ? inputs[2].data : NULL;            \
		T *py = outputs[0].data;                                                                     \
		for (int64_t o = 0; o < outer; o++) {                                                        \
			const T *xs = px + o * inner;                                                        \
			T *ys = py + o * inner;                                                              \
			double mean = 0, var = 0, inv;                                                       \
			ROW_MEAN_VAR(xs, inner, mean, var);                                                 \
			inv = 1.0 / sqrt(var + eps);                                                         \
			for (int64_t i = 0; i < inner; i++) {                                                \
				double v = ((double)xs[i] - mean) * inv * sc[n_sc == 1 ? 0 : i];             \
				ys[i] = (T)(bi != NULL ? v + bi[n_b == 1 ? 0 : i] : v);                      \
			}                                                                                    \
			if (mean_out != NULL)                                                                \
				mean_out[o] = (float)mean;                                                   \
			if (inv_out != NULL)                                                                 \
				inv_out[o] = (float)inv;                                                     \
		}                                                                                            \
	} while (0)

RT_K_RUN(layernorm)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t axis = rt_attr_int(node, "axis", -1), outer, inner, n_sc, n_b = 0;
	double eps = rt_attr_float(node, "epsilon", 1e-5f);
	bool has_b = rt_k_has_input(node, inputs, 2);
	float *mean_out = rt_k_has_output(node, 1) ? outputs[1].data : NULL;
	float *inv_out = rt_k_has_output(node, 2) ? outputs[2].data : NULL;

	if (axis < 0)
		axis += x->rank;
	outer = rt_k_dims_prod(x, 0, (int)axis);
	inner = rt_k_dims_prod(x, (int)axis, x->rank);
	n_sc = rt_tensor_elems(&inputs[1]);
	if (has_b)
		n_b = rt_tensor_elems(&inputs[2]);
	if (inner == 0)
		return 0;
	if (x->dtype == BW_DTYPE_FLOAT)
		LAYERNORM(float);
	else
		LAYERNORM(double);
	return 0;
}

/* ---- InstanceNormalization ----------------------------------------------------------------------- */

RT_K_INFER(instancenorm)
{
	static const char *const names[] = {"input", "scale", "B"};
	float eps;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_FLOATS, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "epsilon", 1e-5f, &eps, err, err_cap)) < 0)
		return rc;
	if (inputs[0].rank < 3)
		return bw_err(err, err_cap, -EINVAL, "input 'input' must have rank >= 3, has %u", inputs[0].rank);
	for (unsigned int i = 1; i < 3; i++) {
		if ((rc = rt_k_need_input(node, inputs, i, names[i], RT_DTYPE_BIT(inputs[0].dtype), err, err_cap)) < 0)
			return rc;
		if (inputs[i].rank != 1 || (inputs[i].dims[0] != inputs[0].dims[1] && inputs[0].dims[1] >= 0))
			return bw_err(err, err_cap, -EINVAL, "input '%s' must be 1-D of %" PRId64 " channels", names[i],
				      inputs[0].dims[1]);
	}
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

#define INSTANCENORM(T)                                                                                      \
	do {                                                                                                 \
		const T *px = x->data, *sc = inputs[1].data, *bi = inputs[2].data;                           \
		T *py = outputs[0].data;                                                                     \
		for (int64_t p = 0; p < planes; p++) {                                                       \
			const T *xs = px + p * inner;                                                        \
			T *ys = py + p * inner;                                                              \
			double mean = 0, var = 0, a;                                                         \
			ROW_MEAN_VAR(xs, inner, mean, var);                                                 \
			a = sc[p % c] / sqrt(var + eps);                                                     \
			for (int64_t i = 0; i < inner; i++)                                                  \
				ys[i] = (T)(((double)xs[i] - mean) * a + bi[p % c]);                         \
		}                                                                                            \
	} while (0)

RT_K_RUN(instancenorm)
{
	const struct rt_tensor *x = &inputs[0];
	double eps = rt_attr_float(node, "epsilon", 1e-5f);
	int64_t c = x->dims[1], planes = x->dims[0] * c, inner = rt_k_dims_prod(x, 2, x->rank);

	if (inner == 0)
		return 0;
	if (x->dtype == BW_DTYPE_FLOAT)
		INSTANCENORM(float);
	else
		INSTANCENORM(double);
	return 0;
}

/* ---- LRN ----------------------------------------------------------------------------------------- */

RT_K_INFER(lrn)
{
	int64_t size;
	float f;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "size", 0, &size, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "alpha", 1e-4f, &f, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "beta", 0.75f, &f, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "bias", 1.0f, &f, err, err_cap)) < 0)
		return rc;
	if (size < 1)
		return bw_err(err, err_cap, -EINVAL, "attribute 'size' must be positive");
	if (inputs[0].rank < 3)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must have rank >= 3, has %u", inputs[0].rank);
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(lrn)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t size = rt_attr_int(node, "size", 1), n = x->dims[0], c = x->dims[1], inner = rt_k_dims_prod(x, 2, x->rank);
	double alpha = rt_attr_float(node, "alpha", 1e-4f), beta = rt_attr_float(node, "beta", 0.75f);
	double bias = rt_attr_float(node, "bias", 1.0f);
	int64_t lo = (size - 1) / 2, hi = size - 1 - lo; /* floor and ceil of (size - 1) / 2 */
	const float *px = x->data;
	float *py = outputs[0].data;

	for (int64_t b = 0; b < n; b++) {
		for (int64_t ch = 0; ch < c; ch++) {
			for (int64_t i = 0; i < inner; i++) {
				double sq = 0;

				for (int64_t k = ch - lo; k <= ch + hi; k++) {
					if (k >= 0 && k < c) {
						double v = px[(b * c + k) * inner + i];
						sq += v * v;
					}
				}
				py[(b * c + ch) * inner + i] =
					(float)(px[(b * c + ch) * inner + i] / pow(bias + alpha / (double)size * sq, beta));
			}
		}
	}
	return 0;
}

/* ---- MeanVarianceNormalization ------------------------------------------------------------------- */

/* ONNX's function body: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over axes (default 0, 2, 3) */
static int mvn_kept(const struct rt_node *node, const struct rt_tensor *x, struct rt_tensor *kept, int64_t *count,
		    char *err, size_t err_cap)
{
	int64_t axes[RT_MAX_RANK] = {0, 2, 3};
	unsigned int n = 3;
	int rc = rt_k_attr_ints(node, "axes", axes, RT_MAX_RANK, &n, err, err_cap);

	if (rc < 0)
		return rc;
	if (rc == 0)
		n = 3;
	if ((rc = rt_k_axes(axes, n, x->rank, "attribute 'axes'", err, err_cap)) < 0)
		return rc;
	*kept = *x;
	*count = 1;
	for (unsigned int i = 0; i < n; i++) {
		*count *= x->dims[axes[i]];
		kept->dims[axes[i]] = 1;
	}
	return 0;
}

RT_K_INFER(mvn)
{
	struct rt_tensor kept;
	int64_t count;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = mvn_kept(node, &inputs[0], &kept, &count, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_SCRATCH(mvn)
{
	struct rt_tensor kept;
	int64_t count;
	char err[RT_ERR_MAX];

	if (mvn_kept(node, &inputs[0], &kept, &count, err, sizeof(err)) < 0)
		return 0;
	return 2 * sizeof(double) * (size_t)rt_tensor_elems(&kept);
}

RT_K_RUN(mvn)
{
	const struct rt_tensor *x = &inputs[0];
	struct rt_tensor kept;
	const struct rt_tensor *ins[2] = {x, &kept};
	struct rt_k_bcast bc;
	const float *px = x->data;
	float *py = outputs[0].data;
	double *sum = scratch, *sq;
	int64_t count, nk;
	int rc = mvn_kept(node, x, &kept, &count, err, err_cap);

	if (rc < 0)
		return rc;
	nk = rt_tensor_elems(&kept);
	sq = sum + nk;
	for (int64_t i = 0; i < nk; i++)
		sum[i] = sq[i] = 0;
	rt_k_bcast_init(&bc, x, ins, 2);
	for (int64_t r = 0; r < bc.rows; r++, rt_k_bcast_next(&bc)) {
		for (int64_t j = 0; j < bc.inner; j++) {
			double v = px[bc.off[0] + j * bc.step[0]];

			sum[bc.off[1] + j * bc.step[1]] += v;
			sq[bc.off[1] + j * bc.step[1]] += v * v;
		}
	}
	for (int64_t i = 0; i < nk; i++) {
		double mean = sum[i] / (double)count, var = sq[i] / (double)count - mean * mean;

		sum[i] = mean;
		sq[i] = sqrt(var > 0 ? var : 0) + 1e-9;
	}
	rt_k_bcast_init(&bc, x, ins, 2);
	for (int64_t r = 0, i = 0; r < bc.rows; r++, rt_k_bcast_next(&bc)) {
		for (int64_t j = 0; j < bc.inner; j++, i++) {
			int64_t k = bc.off[1] + j * bc.step[1];

			py[i] = (float)((px[bc.off[0] + j * bc.step[0]] - sum[k]) / sq[k]);
		}
	}
	return 0;
}
