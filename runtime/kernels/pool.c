/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Pooling: MaxPool (with its optional Indices output), AveragePool, GlobalAveragePool and
 * GlobalMaxPool, over any number of spatial dims. Windows are clipped to the input once per output
 * position, so padding costs nothing inside the loops.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

static bool is_max(const struct rt_node *node)
{
	return strcmp(node->op_type, "MaxPool") == 0 || strcmp(node->op_type, "GlobalMaxPool") == 0;
}

static int pool_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_k_window *w,
		      char *err, size_t err_cap)
{
	bool max = is_max(node);
	uint32_t mask = RT_K_DTYPE_FLOATS | (max ? RT_DTYPE_BIT(BW_DTYPE_INT8) | RT_DTYPE_BIT(BW_DTYPE_UINT8) : 0);
	int64_t v;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", mask, err, err_cap)) < 0 ||
	    (rc = rt_k_window_init(node, &inputs[0], NULL, true, max, w, err, err_cap)) < 0)
		return rc;
	if (max) {
		if ((rc = rt_k_attr_int(node, "storage_order", 0, &v, err, err_cap)) < 0)
			return rc;
		if (v != 0 && v != 1)
			return bw_err(err, err_cap, -EINVAL, "attribute 'storage_order' must be 0 or 1");
	} else {
		if ((rc = rt_k_attr_int(node, "count_include_pad", 0, &v, err, err_cap)) < 0)
			return rc;
		if (v != 0 && v != 1)
			return bw_err(err, err_cap, -EINVAL, "attribute 'count_include_pad' must be 0 or 1");
	}
	return 0;
}

RT_K_INFER(pool)
{
	struct rt_k_window w;
	int rc = pool_setup(node, inputs, &w, err, err_cap);

	if (rc < 0)
		return rc;
	for (unsigned int o = 0; o < 2 && o < node->num_outputs; o++) {
		outputs[o].dtype = o == 0 ? inputs[0].dtype : BW_DTYPE_INT64;
		outputs[o].rank = inputs[0].rank;
		outputs[o].dims[0] = inputs[0].dims[0];
		outputs[o].dims[1] = inputs[0].dims[1];
		memcpy(&outputs[o].dims[2], w.out, (size_t)w.nsp * sizeof(int64_t));
	}
	if (node->num_outputs > 1 && !is_max(node))
		return bw_err(err, err_cap, -EINVAL, "AveragePool has one output");
	return 0;
}

/* The window of one output position, clipped: kernel indices [klo, khi) per spatial dim. */
struct win_pos {
	int64_t base[RT_MAX_RANK]; /* input position of kernel index 0 (may be negative) */
	int64_t klo[RT_MAX_RANK], khi[RT_MAX_RANK];
	int64_t padded_size;       /* the window clipped to the padded input, for count_include_pad */
};

static void window_at(const struct rt_k_window *w, const int64_t *opos, struct win_pos *p)
{
	p->padded_size = 1;
	for (int i = 0; i < w->nsp; i++) {
		int64_t base = opos[i] * w->stride[i] - w->pad_begin[i], d = w->dilation[i], lo = 0, hi = w->kernel[i];
		int64_t end = base + (w->kernel[i] - 1) * d + 1, pend = w->in[i] + w->pad_end[i];

		p->base[i] = base;
		if (base < 0)
			lo = (-base + d - 1) / d;
		if (base + (hi - 1) * d > w->in[i] - 1)
			hi = base > w->in[i] - 1 ? 0 : (w->in[i] - 1 - base) / d + 1;
		p->klo[i] = lo;
		p->khi[i] = hi > lo ? hi : lo;
		p->padded_size *= (end < pend ? end : pend) - base;
	}
}

#define POOL(T)                                                                                              \
	do {                                                                                                 \
		const T *px = x->data;                                                                       \
		T *py = outputs[0].data;                                                                     \
		for (int64_t plane = 0; plane < planes; plane++) {                                           \
			const T *xs = px + plane * in_plane;                                                 \
			int64_t opos[RT_MAX_RANK] = {0};                                                     \
			for (int64_t oi = 0; oi < out_plane; oi++) {                                         \
				struct win_pos p;                                                            \
				int64_t k[RT_MAX_RANK], cnt = 0, best_at = -1;                               \
				double acc = max ? -INFINITY : 0;                                            \
				bool empty = false;                                                          \
				window_at(&w, opos, &p);                                                     \
				for (int i = 0; i < w.nsp; i++) {                                            \
					k[i] = p.klo[i];                                                     \
					empty |= p.khi[i] <= p.klo[i];                                       \
				}                                                                            \
				while (!empty) {                                                             \
					int64_t off = 0, i;                                                  \
					for (i = 0; i < w.nsp; i++)                                          \
						off += (p.base[i] + k[i] * w.dilation[i]) * in_stride[i];     \
					if (max) {                                                           \
						if (best_at < 0 || xs[off] > acc) {                          \
							acc = xs[off];                                       \
							best_at = off;                                       \
						}                                                            \
					} else {                                                             \
						acc += xs[off];                                              \
					}                                                                    \
					cnt++;                                                               \
					for (i = w.nsp - 1; i >= 0; i--) {                                   \
						if (++k[i] < p.khi[i])                                       \
							break;                                               \
						k[i] = p.klo[i];                                             \
					}                                                                    \
					if (i < 0)                                                           \
						break;                                                       \
				}                                                                            \
				if (max) {                                                                   \
					py[plane * out_plane + oi] = (T)acc;                                 \
					if (indices != NULL)                                                 \
						indices[plane * out_plane + oi] =                            \
							plane * in_plane + flat_index(&w, best_at, col_major); \
				} else {                                                                     \
					int64_t div = include_pad ? p.padded_size : cnt;                     \
					py[plane * out_plane + oi] = (T)(div > 0 ? acc / (double)div : 0);   \
				}                                                                            \
				for (int i = w.nsp - 1; i >= 0; i--) {                                       \
					if (++opos[i] < w.out[i])                                            \
						break;                                                       \
					opos[i] = 0;                                                         \
				}                                                                            \
			}                                                                                    \
		}                                                                                            \
	} while (0)

/* The window of output index o along one dim, clipped to the input: kernel indices [lo, hi). */
static void clip_1d(const struct rt_k_window *w, int i, int64_t o, int64_t *base, int64_t *lo, int64_t *hi)
{
	int64_t b = o * w->stride[i] - w->pad_begin[i], d = w->dilation[i], k = w->kernel[i], in = w->in[i];

	*base = b;
	*lo = b < 0 ? (-b + d - 1) / d : 0;
	*hi = b + (k - 1) * d > in - 1 ? (b > in - 1 ? 0 : (in - 1 - b) / d + 1) : k;
	if (*hi < *lo)
		*hi = *lo;
}

/* The common 2-D case without the N-D bookkeeping: same windows, same results as POOL. */
#define POOL2D(T)                                                                                            \
	do {                                                                                                 \
		const T *px = x->data;                                                                       \
		T *py = outputs[0].data;                                                                     \
		const int64_t iw = w.in[1], dh = w.dilation[0], dw = w.dilation[1];                          \
		for (int64_t plane = 0; plane < planes; plane++) {                                           \
			const T *xs = px + plane * in_plane;                                                 \
			for (int64_t oh = 0; oh < w.out[0]; oh++) {                                          \
				int64_t hb, hlo, hhi;                                                        \
				clip_1d(&w, 0, oh, &hb, &hlo, &hhi);                                         \
				for (int64_t ow = 0; ow < w.out[1]; ow++) {                                  \
					int64_t wb, wlo, whi, best_at = -1, oi = plane * out_plane + oh * w.out[1] + ow; \
					double acc = max ? -INFINITY : 0;                                    \
					clip_1d(&w, 1, ow, &wb, &wlo, &whi);                                 \
					for (int64_t kh = hlo; kh < hhi; kh++) {                             \
						const int64_t row = (hb + kh * dh) * iw + wb;                \
						for (int64_t kw = wlo; kw < whi; kw++) {                     \
							const T v = xs[row + kw * dw];                       \
							if (!max)                                            \
								acc += v;                                    \
							else if (best_at < 0 || v > acc) {                   \
								acc = v;                                     \
								best_at = row + kw * dw;                     \
							}                                                    \
						}                                                            \
					}                                                                    \
					if (max) {                                                           \
						py[oi] = (T)acc;                                             \
						if (indices != NULL)                                         \
							indices[oi] = plane * in_plane +                     \
								      flat_index(&w, best_at, col_major);    \
					} else {                                                             \
						int64_t he = hb + (w.kernel[0] - 1) * dh + 1, we = wb + (w.kernel[1] - 1) * dw + 1; \
						int64_t ph = (he < w.in[0] + w.pad_end[0] ? he : w.in[0] + w.pad_end[0]) - hb; \
						int64_t pw = (we < iw + w.pad_end[1] ? we : iw + w.pad_end[1]) - wb; \
						int64_t div = include_pad ? ph * pw : (hhi - hlo) * (whi - wlo); \
						py[oi] = (T)(div > 0 ? acc / (double)div : 0);               \
					}                                                                    \
				}                                                                            \
			}                                                                                    \
		}                                                                                            \
	} while (0)

/* A row-major offset in one plane as MaxPool's Indices: row- or column-major (storage_order 1). */
static int64_t flat_index(const struct rt_k_window *w, int64_t off, bool col_major)
{
	int64_t pos[RT_MAX_RANK], idx = 0, s = 1;

	if (off < 0)
		return 0;
	if (!col_major)
		return off;
	for (int i = w->nsp - 1; i >= 0; i--) {
		pos[i] = off % w->in[i];
		off /= w->in[i];
	}
	for (int i = 0; i < w->nsp; i++) {
		idx += pos[i] * s;
		s *= w->in[i];
	}
	return idx;
}

RT_K_RUN(pool)
{
	const struct rt_tensor *x = &inputs[0];
	struct rt_k_window w;
	bool max = is_max(node);
	bool include_pad = rt_attr_int(node, "count_include_pad", 0) != 0;
	bool col_major = rt_attr_int(node, "storage_order", 0) != 0;
	int64_t *indices = max && rt_k_has_output(node, 1) ? outputs[1].data : NULL;
	int64_t planes, in_plane, out_plane = 1, in_stride[RT_MAX_RANK], s = 1;
	int rc = pool_setup(node, inputs, &w, err, err_cap);

	if (rc < 0)
		return rc;
	planes = x->dims[0] * x->dims[1];
	in_plane = rt_k_dims_prod(x, 2, x->rank);
	for (int i = w.nsp - 1; i >= 0; i--) {
		in_stride[i] = s;
		s *= w.in[i];
		out_plane *= w.out[i];
	}
	if (out_plane == 0)
		return 0;
	if (w.nsp == 2) {
		switch (x->dtype) {
		case BW_DTYPE_FLOAT: POOL2D(float); break;
		case BW_DTYPE_DOUBLE: POOL2D(double); break;
		case BW_DTYPE_INT8: POOL2D(int8_t); break;
		default: POOL2D(uint8_t); break;
		}
		return 0;
	}
	switch (x->dtype) {
	case BW_DTYPE_FLOAT: POOL(float); break;
	case BW_DTYPE_DOUBLE: POOL(double); break;
	case BW_DTYPE_INT8: POOL(int8_t); break;
	default: POOL(uint8_t); break;
	}
	return 0;
}

/* ---- GlobalAveragePool GlobalMaxPool ------------------------------------------------------------- */

RT_K_INFER(global_pool)
{
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_K_DTYPE_FLOATS, err, err_cap);

	if (rc < 0)
		return rc;
	if (inputs[0].rank < 2)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must have rank >= 2, has %u", inputs[0].rank);
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	outputs[0].dims[0] = inputs[0].dims[0];
	outputs[0].dims[1] = inputs[0].dims[1];
	for (int d = 2; d < inputs[0].rank; d++)
		outputs[0].dims[d] = 1;
	return 0;
}

#define GLOBAL_POOL(T)                                                                                       \
	do {                                                                                                 \
		const T *px = x->data;                                                                       \
		T *py = outputs[0].data;                                                                     \
		for (int64_t p = 0; p < planes; p++) {                                                       \
			const T *xs = px + p * inner;                                                        \
			double acc = max ? -INFINITY : 0;                                                    \
			for (int64_t i = 0; i < inner; i++) {                                                \
				if (!max)                                                                    \
					acc += xs[i];                                                        \
				else if (xs[i] > acc)                                                        \
					acc = xs[i];                                                         \
			}                                                                                    \
			py[p] = (T)(max ? acc : acc / (double)inner);                                        \
		}                                                                                            \
	} while (0)

RT_K_RUN(global_pool)
{
	const struct rt_tensor *x = &inputs[0];
	bool max = is_max(node);
	int64_t planes = x->dims[0] * x->dims[1], inner = rt_k_dims_prod(x, 2, x->rank);

	if (x->dtype == BW_DTYPE_FLOAT)
		GLOBAL_POOL(float);
	else
		GLOBAL_POOL(double);
	return 0;
}
