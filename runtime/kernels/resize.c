/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Resize (opsets 11..17) and Upsample (7..9): nearest, (multi)linear and cubic interpolation over any
 * dims, as the ONNX reference does it: each output coordinate maps to an input coordinate by the
 * coordinate_transformation_mode, then 1, 2 or 4 neighbours per dim (the input padded at its edges)
 * are weighted. The neighbours and weights of every output index of every dim are computed once per
 * run into scratch; the interpolation walks their product.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

#define TAPS_MAX 4

enum rs_mode { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum rs_ctm { CTM_HALF_PIXEL, CTM_PYTORCH_HALF_PIXEL, CTM_ALIGN_CORNERS, CTM_ASYMMETRIC, CTM_TF_CROP_AND_RESIZE,
	      CTM_TF_HALF_PIXEL_FOR_NN };
enum rs_nearest { NR_ROUND_PREFER_FLOOR, NR_ROUND_PREFER_CEIL, NR_FLOOR, NR_CEIL };

struct rs_plan {
	enum rs_mode mode;
	enum rs_ctm ctm;
	enum rs_nearest nearest;
	double cubic_a, extrapolation;
	bool exclude_outside;
	int rank;
	int64_t out[RT_MAX_RANK];
	double scale[RT_MAX_RANK];
	double roi_start[RT_MAX_RANK], roi_end[RT_MAX_RANK];
};

/* One output index of one dim: its neighbours and their weights; outside: the extrapolation value. */
struct rs_taps {
	int64_t idx[TAPS_MAX];
	double w[TAPS_MAX];
	int n;
	bool outside;
};

static int pick(const char *v, const char *const *names, unsigned int count, const char *attr, int *out, char *err,
		size_t err_cap)
{
	for (unsigned int i = 0; i < count; i++) {
		if (strcmp(v, names[i]) == 0) {
			*out = (int)i;
			return 0;
		}
	}
	return bw_err(err, err_cap, -EINVAL, "attribute '%s' has unknown or unsupported value '%s'", attr, v);
}

static int read_floats(const struct rt_tensor *t, const char *name, double *out, int64_t count, char *err,
		       size_t err_cap)
{
	if (t->data == NULL)
		return bw_err(err, err_cap, -ENOTSUP, "input '%s' must be a constant", name);
	if (rt_tensor_elems(t) != count)
		return bw_err(err, err_cap, -EINVAL, "input '%s' has %" PRId64 " values, expected %" PRId64, name,
			      rt_tensor_elems(t), count);
	for (int64_t i = 0; i < count; i++)
		out[i] = rt_k_load_f64(t->data, t->dtype, i);
	return 0;
}

static int rs_plan(const struct rt_node *node, const struct rt_tensor *inputs, struct rs_plan *p, char *err,
		   size_t err_cap)
{
	static const char *const modes[] = {"nearest", "linear", "cubic"};
	static const char *const ctms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
					   "tf_crop_and_resize", "tf_half_pixel_for_nn"};
	static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
	const struct rt_tensor *x = &inputs[0];
	bool upsample = strcmp(node->op_type, "Upsample") == 0;
	double scales[RT_MAX_RANK];
	float f;
	int64_t e;
	int rc, m = 0, c = 0, nr = 0;

	memset(p, 0, sizeof(*p));
	p->rank = x->rank;
	if ((rc = pick(rt_attr_string(node, "mode", "nearest"), modes, upsample ? 2 : 3, "mode", &m, err, err_cap)) < 0)
		return rc;
	p->mode = (enum rs_mode)m;
	if (upsample) {
		p->ctm = CTM_ASYMMETRIC;
		p->nearest = NR_FLOOR;
	} else {
		if ((rc = pick(rt_attr_string(node, "coordinate_transformation_mode", "half_pixel"), ctms,
			       node->opset < 13 ? 6 : 5, "coordinate_transformation_mode", &c, err, err_cap)) < 0 ||
		    (rc = pick(rt_attr_string(node, "nearest_mode", "round_prefer_floor"), nearests, 4, "nearest_mode",
			       &nr, err, err_cap)) < 0)
			return rc;
		p->ctm = (enum rs_ctm)c;
		p->nearest = (enum rs_nearest)nr;
		if ((rc = rt_k_attr_float(node, "cubic_coeff_a", -0.75f, &f, err, err_cap)) < 0)
			return rc;
		p->cubic_a = f;
		if ((rc = rt_k_attr_float(node, "extrapolation_value", 0.0f, &f, err, err_cap)) < 0)
			return rc;
		p->extrapolation = f;
		if ((rc = rt_k_attr_int(node, "exclude_outside", 0, &e, err, err_cap)) < 0)
			return rc;
		p->exclude_outside = e != 0;
	}
	if (upsample && node->opset < 9) {
		const struct rt_attr *a = rt_node_attr(node, "scales");

		if (a == NULL || a->type != RT_ATTR_FLOATS || a->count != (uint32_t)p->rank)
			return bw_err(err, err_cap, -EINVAL, "attribute 'scales' must hold %d floats", p->rank);
		for (int d = 0; d < p->rank; d++)
			scales[d] = a->floats[d];
	} else {
		/* Resize: X, roi, scales, sizes; one of scales and sizes given (the other absent or empty) */
		unsigned int si = upsample ? 1 : 2;
		bool has_scales = rt_k_has_input(node, inputs, si) && rt_tensor_elems(&inputs[si]) != 0;
		bool has_sizes = !upsample && rt_k_has_input(node, inputs, 3) && rt_tensor_elems(&inputs[3]) != 0;

		if (has_scales == has_sizes)
			return bw_err(err, err_cap, -EINVAL, "exactly one of inputs 'scales' and 'sizes' must be given");
		if (has_scales) {
			if (inputs[si].dtype >= 32 || (RT_DTYPE_BIT(inputs[si].dtype) & RT_K_DTYPE_FLOATS) == 0)
				return bw_err(err, err_cap, -EINVAL, "input 'scales' must be float");
			if ((rc = read_floats(&inputs[si], "scales", scales, p->rank, err, err_cap)) < 0)
				return rc;
		} else {
			int64_t sizes[RT_MAX_RANK];
			unsigned int n;

			if ((rc = rt_k_read_ints(&inputs[3], "sizes", sizes, RT_MAX_RANK, &n, err, err_cap)) < 0)
				return rc;
			if (n != (unsigned int)p->rank)
				return bw_err(err, err_cap, -EINVAL, "input 'sizes' has %u values for rank %d", n, p->rank);
			for (int d = 0; d < p->rank; d++) {
				if (sizes[d] < 0 || x->dims[d] <= 0)
					return bw_err(err, err_cap, -EINVAL, "input 'sizes' dim %d is invalid", d);
				p->out[d] = sizes[d];
				scales[d] = (double)sizes[d] / (double)x->dims[d];
			}
		}
		if (!upsample && p->ctm == CTM_TF_CROP_AND_RESIZE) {
			double roi[2 * RT_MAX_RANK];

			if (!rt_k_has_input(node, inputs, 1))
				return bw_err(err, err_cap, -EINVAL, "input 'roi' is missing (tf_crop_and_resize)");
			if ((rc = read_floats(&inputs[1], "roi", roi, 2 * p->rank, err, err_cap)) < 0)
				return rc;
			for (int d = 0; d < p->rank; d++) {
				p->roi_start[d] = roi[d];
				p->roi_end[d] = roi[d + p->rank];
			}
		}
		if (!has_scales)
			goto done;
	}
	for (int d = 0; d < p->rank; d++) {
		double out;

		if (!(scales[d] > 0))
			return bw_err(err, err_cap, -EINVAL, "'scales' must be positive");
		if (x->dims[d] < 0)
			return bw_err(err, err_cap, -ENOTSUP, "symbolic dims are not supported");
		out = floor(scales[d] * (double)x->dims[d]);
		if (!(out < (double)INT64_MAX)) /* 2^63, and infinity */
			return bw_err(err, err_cap, -EINVAL, "'scales' %g makes dim %d larger than 2^63", scales[d], d);
		p->out[d] = (int64_t)out;
	}
done:
	memcpy(p->scale, scales, sizeof(scales));
	return 0;
}

RT_K_INFER(resize)
{
	struct rs_plan p;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rs_plan(node, inputs, &p, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, p.out, sizeof(p.out));
	return 0;
}

RT_K_SCRATCH(resize)
{
	int64_t n = 0;

	for (int d = 0; d < outputs[0].rank; d++)
		n += outputs[0].dims[d];
	return (size_t)n * sizeof(struct rs_taps);
}

/* The input coordinate of output index o along dim d, as the reference computes it. */
static double rs_coord(const struct rs_plan *p, int d, int64_t o, int64_t in, bool *outside)
{
	double s = p->scale[d], out_w = s * (double)in, x = (double)o, r;

	*outside = false;
	switch (p->ctm) {
	case CTM_ALIGN_CORNERS:
		return out_w == 1 ? 0 : x * (double)(in - 1) / (out_w - 1);
	case CTM_ASYMMETRIC:
		return x / s;
	case CTM_TF_CROP_AND_RESIZE:
		r = out_w == 1 ? (p->roi_end[d] - p->roi_start[d]) * (double)(in - 1) / 2
			       : x * (p->roi_end[d] - p->roi_start[d]) * (double)(in - 1) / (out_w - 1);
		r += p->roi_start[d] * (double)(in - 1);
		*outside = r < 0 || r > (double)(in - 1);
		return r;
	case CTM_PYTORCH_HALF_PIXEL:
		return out_w == 1 ? -0.5 : (x + 0.5) / s - 0.5;
	case CTM_TF_HALF_PIXEL_FOR_NN:
		return (x + 0.5) / s;
	default:
		return (x + 0.5) / s - 0.5;
	}
}

static void rs_taps(const struct rs_plan *p, int d, int64_t o, int64_t in, struct rs_taps *t)
{
	double x = rs_coord(p, d, o, in, &t->outside), fl = floor(x), r = x - fl, a = p->cubic_a, sum = 0;
	int64_t base;

	/* the reference takes the ratio in (0, 1]: an integer coordinate is the right neighbour, weight 1 */
	if (r == 0) {
		r = 1;
		fl -= 1;
	}
	base = (int64_t)fl;
	switch (p->mode) {
	case RS_NEAREST: {
		bool right;

		switch (p->nearest) {
		case NR_ROUND_PREFER_CEIL: right = r >= 0.5; break;
		case NR_FLOOR: right = r == 1; break;
		case NR_CEIL: right = true; break;
		default: right = r > 0.5; break;
		}
		t->n = 1;
		t->idx[0] = base + (right ? 1 : 0);
		t->w[0] = 1;
		break;
	}
	case RS_LINEAR:
		t->n = 2;
		t->idx[0] = base;
		t->idx[1] = base + 1;
		t->w[0] = 1 - r;
		t->w[1] = r;
		break;
	default:
		t->n = 4;
		for (int k = 0; k < 4; k++)
			t->idx[k] = base - 1 + k;
		t->w[0] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
		t->w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
		t->w[2] = ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1;
		t->w[3] = ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a;
		break;
	}
	for (int k = 0; k < t->n; k++) {
		if (t->idx[k] < 0 || t->idx[k] >= in) {
			if (p->exclude_outside)
				t->w[k] = 0;
			t->idx[k] = t->idx[k] < 0 ? 0 : in - 1; /* the edge padding */
		}
		sum += t->w[k];
	}
	if (p->exclude_outside && sum != 0) {
		for (int k = 0; k < t->n; k++)
			t->w[k] /= sum;
	}
}

RT_K_RUN(resize)
{
	const struct rt_tensor *x = &inputs[0];
	struct rs_taps *taps[RT_MAX_RANK], *t = scratch;
	int64_t strides[RT_MAX_RANK], pos[RT_MAX_RANK] = {0}, n = rt_tensor_elems(&outputs[0]);
	float *y = outputs[0].data;
	const float *px = x->data;
	struct rs_plan p;
	int r = x->rank, rc = rs_plan(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (n == 0)
		return 0;
	if (t == NULL)
		return bw_err(err, err_cap, -EINVAL, "Resize needs scratch memory and got none");
	rt_k_strides(x, strides);
	for (int d = 0; d < r; d++) {
		taps[d] = t;
		for (int64_t o = 0; o < p.out[d]; o++)
			rs_taps(&p, d, o, x->dims[d], t++);
	}
	for (int64_t i = 0; i < n; i++) {
		const struct rs_taps *td[RT_MAX_RANK];
		int k[RT_MAX_RANK] = {0};
		bool outside = false;
		double acc = 0;

		for (int d = 0; d < r; d++) {
			td[d] = &taps[d][pos[d]];
			outside |= td[d]->outside;
		}
		if (outside) {
			acc = p.extrapolation;
		} else {
			for (;;) { /* the product of every dim's neighbours */
				double w = 1;
				int64_t off = 0;
				int d;

				for (d = 0; d < r; d++) {
					w *= td[d]->w[k[d]];
					off += td[d]->idx[k[d]] * strides[d];
				}
				acc += w * px[off];
				for (d = r - 1; d >= 0; d--) {
					if (++k[d] < td[d]->n)
						break;
					k[d] = 0;
				}
				if (d < 0)
					break;
			}
		}
		y[i] = (float)acc;
		for (int d = r - 1; d >= 0; d--) {
			if (++pos[d] < p.out[d])
				break;
			pos[d] = 0;
		}
	}
	return 0;
}
