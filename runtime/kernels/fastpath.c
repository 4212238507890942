/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fast paths of batchwire's domain for the float cases real models spend their time in: Softmax over
 * the last axis, LayerNormalization, and 2-D MaxPool. rt_graph_optimize rewrites an ONNX node into
 * one of these when this kernel's infer accepts the node's shapes; the ONNX kernels (reduce.c,
 * norm.c, pool.c) stay the reference for every other case and for the conformance runner.
 *
 * Why separate kernels: the reference ones are written once for every dtype, rank and axis, with a
 * double accumulator and a libm call per element (Softmax), or an index computation per window
 * element (MaxPool); on MiniLM and ResNet-50 they cost 10 ms and 7 ms a batch of one
 * (docs/performance.md). Here rows are contiguous and the math is vecmath.c's.
 */
#include <immintrin.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "act512.h"
#include "fused.h"
#include "graph.h"

static void same_shape(const struct rt_tensor *x, struct rt_tensor *y)
{
	*y = *x;
	y->data = NULL;
}

/* ---- Softmax over the last axis ------------------------------------------------------------------ */

RT_K_INFER(fast_softmax)
{
	int rc = rt_k_need_input(node, inputs, 0, "input", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap);

	if (rc < 0)
		return rc;
	if (inputs[0].rank < 1)
		return bw_err(err, err_cap, -EINVAL, "input 'input' must have rank >= 1");
	same_shape(&inputs[0], &outputs[0]);
	return 0;
}

RT_K_RUN(fast_softmax)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t n = x->dims[x->rank - 1];

	if (n > 0)
		rt_vm_softmax_rows(outputs[0].data, x->data, rt_tensor_elems(x) / n, n);
	return 0;
}

/* ---- LayerNormalization (output 0 only) ----------------------------------------------------------- */

RT_K_INFER(fast_layernorm)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t axis, inner;
	float eps;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "Scale", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "axis", -1, &axis, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "epsilon", 1e-5f, &eps, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(axis, x->rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	if (rt_k_has_output(node, 1) || rt_k_has_output(node, 2))
		return bw_err(err, err_cap, -ENOTSUP, "outputs Mean and InvStdDev are not computed here");
	inner = rt_k_dims_prod(x, (int)axis, x->rank);
	if (inner <= 0)
		return bw_err(err, err_cap, -ENOTSUP, "the normalized dims must be known and not empty");
	for (unsigned int i = 1; i < 3; i++) {
		int64_t n;

		if (i == 2 && !rt_k_has_input(node, inputs, 2))
			break;
		if (i == 2 && (rc = rt_k_need_input(node, inputs, 2, "B", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0)
			return rc;
		n = rt_tensor_elems(&inputs[i]);
		if (n != inner && n != 1)
			return bw_err(err, err_cap, -EINVAL, "input '%s' has %" PRId64 " elements, the normalized dims %"
				      PRId64, i == 1 ? "Scale" : "B", n, inner);
	}
	same_shape(x, &outputs[0]);
	return 0;
}

RT_K_RUN(fast_layernorm)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t axis = rt_attr_int(node, "axis", -1), inner, rows;
	bool has_b = rt_k_has_input(node, inputs, 2);

	if (axis < 0)
		axis += x->rank;
	inner = rt_k_dims_prod(x, (int)axis, x->rank);
	rows = rt_k_dims_prod(x, 0, (int)axis);
	rt_vm_layernorm_rows(outputs[0].data, x->data, rows, inner, inputs[1].data, rt_tensor_elems(&inputs[1]),
			     has_b ? inputs[2].data : NULL, has_b ? rt_tensor_elems(&inputs[2]) : 0,
			     rt_attr_float(node, "epsilon", 1e-5f));
	return 0;
}

/* ---- MaxPool, 2-D ---------------------------------------------------------------------------------- */

static int maxpool_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_k_window *w,
			 char *err, size_t err_cap)
{
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap);

	if (rc < 0)
		return rc;
	if (inputs[0].rank != 4)
		return bw_err(err, err_cap, -ENOTSUP, "input 'X' must be 4-D (N, C, H, W)");
	if (rt_k_has_output(node, 1))
		return bw_err(err, err_cap, -ENOTSUP, "output Indices is not computed here");
	/* dilations other than 1 are refused: the rows below are contiguous windows */
	return rt_k_window_init(node, &inputs[0], NULL, true, false, w, err, err_cap);
}

RT_K_INFER(fast_maxpool)
{
	struct rt_k_window w;
	int rc = maxpool_setup(node, inputs, &w, err, err_cap);

	if (rc < 0)
		return rc;
	outputs[0] = inputs[0];
	outputs[0].data = NULL;
	outputs[0].dims[2] = w.out[0];
	outputs[0].dims[3] = w.out[1];
	return 0;
}

RT_K_SCRATCH(fast_maxpool)
{
	return inputs[0].rank == 4 && inputs[0].dims[3] > 0 ? (size_t)inputs[0].dims[3] * sizeof(float) : 0;
}

/*
 * Per output row: the window's input rows reduced to one row by an elementwise max (vectorized),
 * then each output the max of its columns of that row. The first element of a window (top left) is
 * taken first and replaced only by a greater one, as the reference kernel does: a NaN there stays,
 * a NaN elsewhere is passed over. A window wholly in the padding gives -inf.
 */
typedef int64_t maxpool_row_k3s2_fn(const float *row, float *y, int64_t first, int64_t end, int64_t pad);
static maxpool_row_k3s2_fn maxpool_row_k3s2_avx512, maxpool_row_k3s2_avx2;

static void maxpool_plane(const struct rt_k_window *w, const float *x, float *y, float *row)
{
	int64_t ih = w->in[0], iw = w->in[1];
	/* the outputs whose 3-wide, stride-2 windows lie wholly inside the row: vectorized below */
	maxpool_row_k3s2_fn *k3s2 = w->kernel[1] != 3 || w->stride[1] != 2 ? NULL :
				    rt_cpu_isa_active() >= RT_CPU_ISA_AVX512 ? maxpool_row_k3s2_avx512 :
				    rt_cpu_isa_active() >= RT_CPU_ISA_AVX2 ? maxpool_row_k3s2_avx2 : NULL;
	int64_t in_first = (w->pad_begin[1] + 1) / 2;
	int64_t in_end = iw - 3 + w->pad_begin[1] < 0 ? 0 : (iw - 3 + w->pad_begin[1]) / 2 + 1;

	in_end = in_end < w->out[1] ? in_end : w->out[1];

	for (int64_t oh = 0; oh < w->out[0]; oh++) {
		int64_t hs = oh * w->stride[0] - w->pad_begin[0], h0 = hs < 0 ? 0 : hs, h1 = hs + w->kernel[0];

		h1 = h1 < ih ? h1 : ih;
		if (h0 < h1) {
			memcpy(row, x + h0 * iw, (size_t)iw * sizeof(float));
			for (int64_t h = h0 + 1; h < h1; h++) {
				const float *xr = x + h * iw;

				for (int64_t j = 0; j < iw; j++)
					row[j] = xr[j] > row[j] ? xr[j] : row[j];
			}
		}
		for (int64_t ow = 0; ow < w->out[1]; ow++, y++) {
			int64_t ws = ow * w->stride[1] - w->pad_begin[1], w0 = ws < 0 ? 0 : ws, w1 = ws + w->kernel[1];
			float m;

			if (k3s2 != NULL && h0 < h1 && ow == in_first && in_first < in_end) {
				int64_t done = k3s2(row, y, in_first, in_end, w->pad_begin[1]);

				if (done > 0) {
					ow += done - 1;
					y += done - 1;
					continue;
				}
			}
			w1 = w1 < iw ? w1 : iw;
			if (h0 >= h1 || w0 >= w1) {
				*y = -INFINITY;
				continue;
			}
			m = row[w0];
			for (int64_t j = w0 + 1; j < w1; j++)
				m = row[j] > m ? row[j] : m;
			*y = m;
		}
	}
}

/*
 * Outputs first..end-1 of a row under 3-wide windows at stride 2 (ResNet's stem pool), each window
 * wholly inside the row: 16 a vector, the window's columns its even, odd and next even values,
 * taken in the window's order (the first, then a greater one), as the loop above. \return end - first.
 */
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl"))) static int64_t
maxpool_row_k3s2_avx512(const float *row, float *y, int64_t first, int64_t end, int64_t pad)
{
	const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);

	for (int64_t ow = first; ow < end; ow += 16) {
		int64_t left = end - ow < 16 ? end - ow : 16, in = 2 * left + 1;
		const float *p = row + 2 * ow - pad;
		/* the window's values for these outputs: p[0 .. 2 * left], read no further */
		__mmask16 m0 = lane_mask16(in);
		__mmask16 m1 = lane_mask16(in - 16);
		__mmask16 n0 = lane_mask16(in - 1);
		__mmask16 n1 = lane_mask16(in - 17);
		__m512 a = _mm512_maskz_loadu_ps(m0, p), b = _mm512_maskz_loadu_ps(m1, p + 16);
		__m512 a1 = _mm512_maskz_loadu_ps(n0, p + 1), b1 = _mm512_maskz_loadu_ps(n1, p + 17);
		__m512 c0 = _mm512_permutex2var_ps(a, even_idx, b), c1 = _mm512_permutex2var_ps(a, odd_idx, b);
		__m512 c2 = _mm512_permutex2var_ps(a1, odd_idx, b1);

		_mm512_mask_storeu_ps(y + (ow - first), (__mmask16)((1u << left) - 1),
				      _mm512_max_ps(c2, _mm512_max_ps(c1, c0)));
	}
	return end - first;
}

/*
 * The same at AVX2's width: 8 outputs a vector from 17 values (the even and odd ones of p[0..15],
 * and the odd ones of p[1..16]: the next even), whole vectors only, so no masks. \return the
 * outputs done, a multiple of 8: the caller's loop does the rest. ResNet-50's stem pool at batch 1
 * on an AMD EPYC: 0.87-1.18 ms on that loop alone, 0.26-0.46 with this.
 */
__attribute__((target("avx2"))) static int64_t maxpool_row_k3s2_avx2(const float *row, float *y, int64_t first,
								      int64_t end, int64_t pad)
{
	int64_t ow;

	for (ow = first; ow + 8 <= end; ow += 8) {
		const float *p = row + 2 * ow - pad;
		__m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);
		__m256 lo1 = _mm256_loadu_ps(p + 1), hi1 = _mm256_loadu_ps(p + 9);
		/* in-lane shuffles pick each lane's evens (odds); the 64-bit permute puts the lanes in order */
		__m256 c0 = _mm256_castpd_ps(_mm256_permute4x64_pd(
			_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
		__m256 c1 = _mm256_castpd_ps(_mm256_permute4x64_pd(
			_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
		__m256 c2 = _mm256_castpd_ps(_mm256_permute4x64_pd(
			_mm256_castps_pd(_mm256_shuffle_ps(lo1, hi1, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));

		_mm256_storeu_ps(y + (ow - first), _mm256_max_ps(c2, _mm256_max_ps(c1, c0)));
	}
	return ow - first;
}

/*
 * 2x2 windows at stride 2 without padding, every window whole (the small CNN's and most classifiers'
 * downsampling): each output row is two input rows, reduced without the window bookkeeping above,
 * in the same order (the two rows first, then the two columns; a greater value replaces, so NaNs
 * pass as above). The general path did this at 0.5 ns per input value, 18 % of the CNN's time.
 */
static bool maxpool_is_2x2(const struct rt_k_window *w)
{
	for (int i = 0; i < 2; i++) {
		if (w->kernel[i] != 2 || w->stride[i] != 2 || w->dilation[i] != 1 || w->pad_begin[i] != 0 ||
		    w->pad_end[i] != 0 || w->out[i] * 2 > w->in[i])
			return false;
	}
	return true;
}

/* One output row of n values from input rows r0 and r1. */
typedef void maxpool2x2_row_fn(const float *r0, const float *r1, float *y, int64_t n);

static inline float max_later(float later, float first)
{
	return later > first ? later : first;
}

static void maxpool2x2_row_c(const float *r0, const float *r1, float *y, int64_t n)
{
	for (int64_t j = 0; j < n; j++)
		y[j] = max_later(max_later(r1[2 * j + 1], r0[2 * j + 1]), max_later(r1[2 * j], r0[2 * j]));
}

/* Outputs j..j+7 of a row. _mm*_max_ps(a, b) is a > b ? a : b, NaN giving b: max_later's order. */
__attribute__((target("avx2,fma"))) static inline void maxpool2x2_8_avx2(const float *r0, const float *r1, float *y,
									 int64_t j)
{
	__m256 a = _mm256_max_ps(_mm256_loadu_ps(r1 + 2 * j), _mm256_loadu_ps(r0 + 2 * j));
	__m256 b = _mm256_max_ps(_mm256_loadu_ps(r1 + 2 * j + 8), _mm256_loadu_ps(r0 + 2 * j + 8));
	/* even and odd columns, each in 128-bit-lane order a0 a2 b0 b2 | a4 a6 b4 b6: fixed below */
	__m256 even = _mm256_shuffle_ps(a, b, 0x88), odd = _mm256_shuffle_ps(a, b, 0xdd);
	__m256 m = _mm256_max_ps(odd, even);

	_mm256_storeu_ps(y + j, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), 0xd8)));
}

/* Outputs j..j+3 of a row, from 8 values of each input row. */
__attribute__((target("avx2,fma"))) static inline void maxpool2x2_4_avx2(const float *r0, const float *r1, float *y,
									 int64_t j)
{
	__m256 a = _mm256_max_ps(_mm256_loadu_ps(r1 + 2 * j), _mm256_loadu_ps(r0 + 2 * j));
	/* per lane: a0 a2 a0 a2 | a4 a6 a4 a6 and the odd ones; their max's 64-bit halves 0 and 2 */
	__m256 m = _mm256_max_ps(_mm256_shuffle_ps(a, a, 0xdd), _mm256_shuffle_ps(a, a, 0x88));

	_mm_storeu_ps(y + j, _mm256_castps256_ps128(_mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(m), 0x08))));
}

/*
 * A row's last outputs that fill no whole vector are one more vector ending at the row's end,
 * overlapping outputs already stored (the same values again): the small CNN's second pool, rows
 * of 7 outputs, ran wholly in the scalar loop (52-55 us at batch 32 on an AMD EPYC).
 */
__attribute__((target("avx2,fma"))) static void maxpool2x2_row_avx2(const float *r0, const float *r1, float *y,
								   int64_t n)
{
	int64_t j = 0;

	if (n < 4) {
		maxpool2x2_row_c(r0, r1, y, n);
		return;
	}
	if (n < 8) {
		maxpool2x2_4_avx2(r0, r1, y, 0);
		maxpool2x2_4_avx2(r0, r1, y, n - 4);
		return;
	}
	for (; j + 8 <= n; j += 8)
		maxpool2x2_8_avx2(r0, r1, y, j);
	if (j < n)
		maxpool2x2_8_avx2(r0, r1, y, n - 8);
}

static void maxpool2x2_rows(maxpool2x2_row_fn *row, const struct rt_k_window *w, const float *x, float *y,
			    int64_t planes)
{
	int64_t iw = w->in[1], in_plane = w->in[0] * iw, oh_n = w->out[0], ow_n = w->out[1];

	for (int64_t p = 0; p < planes; p++) {
		const float *xp = x + p * in_plane;

		for (int64_t oh = 0; oh < oh_n; oh++, y += ow_n)
			row(xp + 2 * oh * iw, xp + (2 * oh + 1) * iw, y, ow_n);
	}
}

static void maxpool2x2_c(const struct rt_k_window *w, const float *x, float *y, int64_t planes)
{
	maxpool2x2_rows(maxpool2x2_row_c, w, x, y, planes);
}

static void maxpool2x2_avx2(const struct rt_k_window *w, const float *x, float *y, int64_t planes)
{
	maxpool2x2_rows(maxpool2x2_row_avx2, w, x, y, planes);
}

#define MP512_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))

/*
 * 16 outputs from 32 inputs per row, the tail masked (masked-off lanes are not read), the masks
 * made once per call: rows of the CNN's pools are 7 and 14 outputs, one vector each, where per-row
 * set-up and a call per row were most of the work.
 */
MP512_TARGET static void maxpool2x2_wide_avx512(const struct rt_k_window *w, const float *x, float *y,
						int64_t planes)
{
	const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	int64_t iw = w->in[1], in_plane = w->in[0] * iw, oh_n = w->out[0], n = w->out[1];
	int64_t tail = n % 16 != 0 ? n % 16 : 16, tail_in = 2 * tail;
	__mmask16 t0 = lane_mask16(tail_in);
	__mmask16 t1 = lane_mask16(tail_in - 16);
	__mmask16 ts = (__mmask16)((1u << tail) - 1);

	for (int64_t p = 0; p < planes; p++) {
		for (int64_t oh = 0; oh < oh_n; oh++, y += n) {
			const float *r0 = x + p * in_plane + 2 * oh * iw, *r1 = r0 + iw;

			for (int64_t j = 0; j < n; j += 16) {
				bool last = j + 16 >= n;
				__mmask16 m0 = last ? t0 : 0xffff, m1 = last ? t1 : 0xffff;
				__m512 a = _mm512_max_ps(_mm512_maskz_loadu_ps(m0, r1 + 2 * j), _mm512_maskz_loadu_ps(m0, r0 + 2 * j));
				__m512 b = _mm512_max_ps(_mm512_maskz_loadu_ps(m1, r1 + 2 * j + 16),
							 _mm512_maskz_loadu_ps(m1, r0 + 2 * j + 16));
				__m512 m = _mm512_max_ps(_mm512_permutex2var_ps(a, odd_idx, b),
							 _mm512_permutex2var_ps(a, even_idx, b));

				_mm512_mask_storeu_ps(y + j, last ? ts : 0xffff, m);
			}
		}
	}
}

/*
 * Rows of at most 8 outputs (16 inputs): two output rows to one vector, the even and odd columns
 * of both picked by one pair of permutes, stored as one run of 2n (the rows of y are contiguous).
 */
MP512_TARGET static void maxpool2x2_narrow_avx512(const struct rt_k_window *w, const float *x, float *y,
						  int64_t planes)
{
	int64_t iw = w->in[1], in_plane = w->in[0] * iw, oh_n = w->out[0], n = w->out[1];
	__mmask16 in_mask = (__mmask16)((1u << (2 * n)) - 1), two = (__mmask16)((1u << (2 * n)) - 1);
	__mmask16 one = (__mmask16)((1u << n) - 1);
	int32_t even[16], odd[16];

	for (int j = 0; j < 16; j++) {
		int src = j < n ? 2 * j : 16 + 2 * (j - (int)n);

		even[j] = src < 32 ? src : 0;
		odd[j] = src + 1 < 32 ? src + 1 : 0;
	}
	__m512i even_idx = _mm512_loadu_si512(even), odd_idx = _mm512_loadu_si512(odd);

	for (int64_t p = 0; p < planes; p++) {
		const float *xp = x + p * in_plane;
		int64_t oh = 0;

		for (; oh + 2 <= oh_n; oh += 2, y += 2 * n) {
			const float *r0 = xp + 2 * oh * iw;
			__m512 a = _mm512_max_ps(_mm512_maskz_loadu_ps(in_mask, r0 + iw), _mm512_maskz_loadu_ps(in_mask, r0));
			__m512 b = _mm512_max_ps(_mm512_maskz_loadu_ps(in_mask, r0 + 3 * iw),
						 _mm512_maskz_loadu_ps(in_mask, r0 + 2 * iw));
			__m512 m = _mm512_max_ps(_mm512_permutex2var_ps(a, odd_idx, b), _mm512_permutex2var_ps(a, even_idx, b));

			_mm512_mask_storeu_ps(y, two, m);
		}
		if (oh < oh_n) {
			const float *r0 = xp + 2 * oh * iw;
			__m512 a = _mm512_max_ps(_mm512_maskz_loadu_ps(in_mask, r0 + iw), _mm512_maskz_loadu_ps(in_mask, r0));
			__m512 m = _mm512_max_ps(_mm512_permutex2var_ps(a, odd_idx, a), _mm512_permutex2var_ps(a, even_idx, a));

			_mm512_mask_storeu_ps(y, one, m);
			y += n;
		}
	}
}

MP512_TARGET static void maxpool2x2_avx512(const struct rt_k_window *w, const float *x, float *y, int64_t planes)
{
	(w->out[1] <= 8 ? maxpool2x2_narrow_avx512 : maxpool2x2_wide_avx512)(w, x, y, planes);
}

typedef void maxpool2x2_fn(const struct rt_k_window *w, const float *x, float *y, int64_t planes);

static maxpool2x2_fn *maxpool2x2_by_isa(void)
{
	static maxpool2x2_fn *const by_isa[RT_CPU_ISA_COUNT] = {
		[RT_CPU_ISA_BASELINE] = maxpool2x2_c,
		[RT_CPU_ISA_AVX2] = maxpool2x2_avx2,
		[RT_CPU_ISA_AVX512] = maxpool2x2_avx512,
		[RT_CPU_ISA_AMX] = maxpool2x2_avx512,
	};

	return by_isa[rt_cpu_isa_active()];
}

RT_K_RUN(fast_maxpool)
{
	const struct rt_tensor *x = &inputs[0];
	struct rt_k_window w;
	int64_t planes = x->dims[0] * x->dims[1], in_plane = x->dims[2] * x->dims[3];
	int rc = maxpool_setup(node, inputs, &w, err, err_cap);

	if (rc < 0)
		return rc;
	if (maxpool_is_2x2(&w)) {
		maxpool2x2_by_isa()(&w, x->data, outputs[0].data, planes);
		return 0;
	}
	if (scratch == NULL && in_plane > 0)
		return bw_err(err, err_cap, -EINVAL, "MaxPool needs scratch memory and got none");
	for (int64_t p = 0; p < planes; p++)
		maxpool_plane(&w, (const float *)x->data + p * in_plane, (float *)outputs[0].data + p * w.out[0] * w.out[1],
			      scratch);
	return 0;
}
