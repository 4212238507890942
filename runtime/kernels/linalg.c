/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MatMul, Gemm, Conv and ConvTranspose on OpenBLAS's sgemm/dgemm.
 *
 * Why OpenBLAS: its C API (cblas) is a plain function call on caller-owned memory, which is what a
 * kernel that may not allocate needs: the im2col/col2im buffers come from the arena as scratch.
 * It runs single-threaded when told to (openblas_set_num_threads(1) in rt_cpu_kernels_register),
 * so each executor lcore does its own GEMMs without a thread pool of the library competing for the
 * cores. Debian's oneDNN is built against OpenMP and would bring an OpenMP pool into our worker
 * lcores, with primitive objects to create and cache per shape.
 */
#include <cblas.h>
#include <inttypes.h>
#include <string.h>

#include "kernels.h"

/* BLAS dims are int: larger products are refused at load rather than truncated at run. */
static bool blas_dim_ok(int64_t v)
{
	return v >= 0 && v <= INT32_MAX;
}

static void gemm(uint8_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
		 int64_t lda, const void *b, int64_t ldb, float beta, void *c, int64_t ldc)
{
	if (m == 0 || n == 0)
		return;
	if (k == 0) { /* BLAS may not touch C when k is 0; ONNX wants beta * C */
		for (int64_t i = 0; i < m; i++) {
			for (int64_t j = 0; j < n; j++) {
				if (dtype == BW_DTYPE_FLOAT)
					((float *)c)[i * ldc + j] = beta == 0 ? 0 : beta * ((float *)c)[i * ldc + j];
				else
					((double *)c)[i * ldc + j] = beta == 0 ? 0 : beta * ((double *)c)[i * ldc + j];
			}
		}
		return;
	}
	if (m == 1) {
		/* One row (a batch of 1 through Gemm/MatMul): GEMV is 7x faster than GEMM here
		 * (docs/performance.md). c = alpha * op(B)^T . a + beta * c, with a's elements lda apart
		 * when A is transposed. Some BLAS scale y by beta even when it is 0: clear it first so
		 * whatever the arena held (NaN included) cannot leak in. */
		int x_inc = ta ? (int)lda : 1;
		if (beta == 0)
			memset(c, 0, (size_t)n * (dtype == BW_DTYPE_FLOAT ? sizeof(float) : sizeof(double)));
		if (dtype == BW_DTYPE_FLOAT)
			cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? (int)n : (int)k, tb ? (int)k : (int)n,
				    alpha, b, (int)ldb, a, x_inc, beta, c, 1);
		else
			cblas_dgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? (int)n : (int)k, tb ? (int)k : (int)n,
				    alpha, b, (int)ldb, a, x_inc, beta, c, 1);
		return;
	}
	if (dtype == BW_DTYPE_FLOAT)
		cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m,
			    (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
	else
		cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)m,
			    (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* ---- MatMul -------------------------------------------------------------------------------------- */

/* numpy matmul: 1-D operands gain then lose a dim; batch dims broadcast. */
struct mm_plan {
	int64_t m, k, n;
	struct rt_tensor abatch, bbatch, obatch; /* the batch dims only */
};

static int mm_plan(const struct rt_tensor *a, const struct rt_tensor *b, struct mm_plan *p, char *err,
		   size_t err_cap)
{
	static const char *const names[] = {"A", "B"};
	const struct rt_tensor *ins[2] = {&p->abatch, &p->bbatch};
	int64_t kb;
	char x[96], y[96];
	int rc;

	if (a->rank < 1 || b->rank < 1)
		return rt_k_err(err, err_cap, -EINVAL, "input '%s' must have rank >= 1", a->rank < 1 ? "A" : "B");
	p->m = a->rank == 1 ? 1 : a->dims[a->rank - 2];
	p->k = a->dims[a->rank - 1];
	kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
	p->n = b->rank == 1 ? 1 : b->dims[b->rank - 1];
	if (p->k != kb && p->k >= 0 && kb >= 0)
		return rt_k_err(err, err_cap, -EINVAL, "inputs 'A' %s and 'B' %s: inner dims %" PRId64 " and %" PRId64
				" differ", rt_k_dims_str(a, x, sizeof(x)), rt_k_dims_str(b, y, sizeof(y)), p->k, kb);
	memset(&p->abatch, 0, sizeof(p->abatch));
	memset(&p->bbatch, 0, sizeof(p->bbatch));
	p->abatch.rank = a->rank > 2 ? (uint8_t)(a->rank - 2) : 0;
	p->bbatch.rank = b->rank > 2 ? (uint8_t)(b->rank - 2) : 0;
	memcpy(p->abatch.dims, a->dims, p->abatch.rank * sizeof(int64_t));
	memcpy(p->bbatch.dims, b->dims, p->bbatch.rank * sizeof(int64_t));
	rc = rt_k_broadcast_shape(ins, names, 2, &p->obatch, err, err_cap);
	if (rc < 0)
		return rt_k_err(err, err_cap, -EINVAL, "batch dims of inputs 'A' %s and 'B' %s do not broadcast",
				rt_k_dims_str(a, x, sizeof(x)), rt_k_dims_str(b, y, sizeof(y)));
	return 0;
}

RT_K_INFER(matmul)
{
	struct mm_plan p;
	struct rt_tensor *out = &outputs[0];
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "A", RT_K_DTYPE_FLOATS, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "B", RT_K_DTYPE_FLOATS, err, err_cap)) < 0)
		return rc;
	if (inputs[1].dtype != inputs[0].dtype)
		return rt_k_err(err, err_cap, -EINVAL, "input 'B' is %s but 'A' is %s", rt_dtype_name(inputs[1].dtype),
				rt_dtype_name(inputs[0].dtype));
	if ((rc = mm_plan(&inputs[0], &inputs[1], &p, err, err_cap)) < 0)
		return rc;
	if (!blas_dim_ok(p.m) && p.m >= 0)
		return rt_k_err(err, err_cap, -ENOTSUP, "MatMul dims beyond 2^31 are not supported");
	*out = (struct rt_tensor){.dtype = inputs[0].dtype, .rank = p.obatch.rank, .data = out->data};
	memcpy(out->dims, p.obatch.dims, sizeof(out->dims));
	if (inputs[0].rank > 1)
		out->dims[out->rank++] = p.m;
	if (inputs[1].rank > 1)
		out->dims[out->rank++] = p.n;
	return 0;
}

RT_K_RUN(matmul)
{
	const struct rt_tensor *a = &inputs[0], *b = &inputs[1];
	size_t esize = rt_dtype_size(a->dtype);
	const struct rt_tensor *ins[2];
	struct rt_k_bcast bc;
	struct mm_plan p;
	int rc = mm_plan(a, b, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (p.bbatch.rank == 0) { /* B is one matrix: every batch of A is one tall matrix */
		int64_t rows = rt_tensor_elems(&p.abatch) * p.m;

		gemm(a->dtype, false, false, rows, p.n, p.k, 1.0f, a->data, p.k, b->data, p.n, 0.0f, outputs[0].data,
		     p.n);
		return 0;
	}
	ins[0] = &p.abatch;
	ins[1] = &p.bbatch;
	rt_k_bcast_init(&bc, &p.obatch, ins, 2);
	for (int64_t r = 0, i = 0; r < bc.rows; r++, rt_k_bcast_next(&bc)) {
		for (int64_t j = 0; j < bc.inner; j++, i++) {
			const char *pa = (const char *)a->data + (bc.off[0] + j * bc.step[0]) * p.m * p.k * (int64_t)esize;
			const char *pb = (const char *)b->data + (bc.off[1] + j * bc.step[1]) * p.k * p.n * (int64_t)esize;
			char *pc = (char *)outputs[0].data + i * p.m * p.n * (int64_t)esize;

			gemm(a->dtype, false, false, p.m, p.n, p.k, 1.0f, pa, p.k, pb, p.n, 0.0f, pc, p.n);
		}
	}
	return 0;
}

/* ---- Gemm ---------------------------------------------------------------------------------------- */

RT_K_INFER(gemm)
{
	const struct rt_tensor *a = &inputs[0], *b = &inputs[1];
	int64_t ta, tb, m, k, kb, n;
	float alpha, beta;
	char x[96], y[96];
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "A", RT_K_DTYPE_FLOATS, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "B", RT_DTYPE_BIT(a->dtype), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "transA", 0, &ta, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "transB", 0, &tb, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "alpha", 1.0f, &alpha, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "beta", 1.0f, &beta, err, err_cap)) < 0)
		return rc;
	if (a->rank != 2 || b->rank != 2)
		return rt_k_err(err, err_cap, -EINVAL, "input '%s' must be 2-D", a->rank != 2 ? "A" : "B");
	m = a->dims[ta ? 1 : 0];
	k = a->dims[ta ? 0 : 1];
	kb = b->dims[tb ? 1 : 0];
	n = b->dims[tb ? 0 : 1];
	if (k != kb && k >= 0 && kb >= 0)
		return rt_k_err(err, err_cap, -EINVAL, "inputs 'A' %s and 'B' %s: inner dims %" PRId64 " and %" PRId64
				" differ (transA %" PRId64 ", transB %" PRId64 ")", rt_k_dims_str(a, x, sizeof(x)),
				rt_k_dims_str(b, y, sizeof(y)), k, kb, ta, tb);
	if (!blas_dim_ok(m < 0 ? 0 : m) || !blas_dim_ok(n < 0 ? 0 : n) || !blas_dim_ok(k < 0 ? 0 : k))
		return rt_k_err(err, err_cap, -ENOTSUP, "Gemm dims beyond 2^31 are not supported");
	outputs[0] = (struct rt_tensor){.dtype = a->dtype, .rank = 2, .dims = {m, n}, .data = outputs[0].data};
	if (rt_k_has_input(node, inputs, 2)) {
		const struct rt_tensor *c = &inputs[2];

		if ((rc = rt_k_need_input(node, inputs, 2, "C", RT_DTYPE_BIT(a->dtype), err, err_cap)) < 0)
			return rc;
		/* unidirectional: C broadcasts to [M, N], never the other way */
		if (c->rank > 2 || (c->rank == 2 && c->dims[0] != 1 && c->dims[0] != m) ||
		    (c->rank >= 1 && c->dims[c->rank - 1] != 1 && c->dims[c->rank - 1] != n))
			return rt_k_err(err, err_cap, -EINVAL, "input 'C' %s does not broadcast to [%" PRId64 ",%" PRId64 "]",
					rt_k_dims_str(c, x, sizeof(x)), m, n);
	}
	return 0;
}

RT_K_RUN(gemm)
{
	const struct rt_tensor *a = &inputs[0], *b = &inputs[1], *y = &outputs[0];
	bool ta = rt_attr_int(node, "transA", 0) != 0, tb = rt_attr_int(node, "transB", 0) != 0;
	float alpha = rt_attr_float(node, "alpha", 1.0f), beta = rt_attr_float(node, "beta", 1.0f);
	int64_t m = y->dims[0], n = y->dims[1], k = a->dims[ta ? 0 : 1];

	if (rt_k_has_input(node, inputs, 2) && beta != 0.0f) {
		const struct rt_tensor *c = &inputs[2];
		int64_t strides[2] = {0, 0};

		if (c->rank == 2) {
			strides[0] = c->dims[0] == 1 ? 0 : c->dims[1];
			strides[1] = c->dims[1] == 1 ? 0 : 1;
		} else if (c->rank == 1) {
			strides[1] = c->dims[0] == 1 ? 0 : 1;
		}
		rt_k_copy_strided(y->data, c->data, 2, y->dims, strides, rt_dtype_size(y->dtype));
	} else {
		beta = 0.0f;
	}
	gemm(a->dtype, ta, tb, m, n, k, alpha, a->data, a->dims[1], b->data, b->dims[1], beta, y->data, n);
	return 0;
}

/* ---- Conv ---------------------------------------------------------------------------------------- */

struct conv_plan {
	struct rt_k_window w;
	int64_t n, c, m, group, cg, mg, ksize, in_size, out_size;
	bool direct; /* 1x1, stride 1, no pad: X is its own im2col matrix */
};

static int conv_plan(const struct rt_node *node, const struct rt_tensor *inputs, bool transpose,
		     struct conv_plan *p, char *err, size_t err_cap)
{
	const struct rt_tensor *x = &inputs[0], *w = &inputs[1];
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "W", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "group", 1, &p->group, err, err_cap)) < 0)
		return rc;
	if (x->rank < 3 || w->rank != x->rank)
		return rt_k_err(err, err_cap, -EINVAL, "inputs 'X' (rank %u) and 'W' (rank %u) must have the same "
				"rank >= 3", x->rank, w->rank);
	if (p->group < 1)
		return rt_k_err(err, err_cap, -EINVAL, "attribute 'group' must be positive");
	p->n = x->dims[0];
	p->c = x->dims[1];
	if (p->c < 0 || rt_k_dims_prod(w, 0, w->rank) < 0)
		return rt_k_err(err, err_cap, -ENOTSUP, "symbolic channel or kernel dims are not supported");
	if (p->c % p->group != 0)
		return rt_k_err(err, err_cap, -EINVAL, "input 'X' has %" PRId64 " channels, not a multiple of 'group' %"
				PRId64, p->c, p->group);
	p->cg = p->c / p->group;
	if (!transpose) {
		p->m = w->dims[0];
		if (w->dims[1] != p->cg)
			return rt_k_err(err, err_cap, -EINVAL, "input 'W' has %" PRId64 " input channels, expected %" PRId64,
					w->dims[1], p->cg);
		if (p->m % p->group != 0)
			return rt_k_err(err, err_cap, -EINVAL, "input 'W' has %" PRId64 " filters, not a multiple of 'group' %"
					PRId64, p->m, p->group);
		p->mg = p->m / p->group;
	} else {
		if (w->dims[0] != p->c)
			return rt_k_err(err, err_cap, -EINVAL, "input 'W' has %" PRId64 " input channels, 'X' has %" PRId64,
					w->dims[0], p->c);
		p->mg = w->dims[1];
		p->m = p->mg * p->group;
	}
	if (rt_k_has_input(node, inputs, 2)) {
		if ((rc = rt_k_need_input(node, inputs, 2, "B", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0)
			return rc;
		if (inputs[2].rank != 1 || inputs[2].dims[0] != p->m)
			return rt_k_err(err, err_cap, -EINVAL, "input 'B' must be 1-D of %" PRId64 " values", p->m);
	}
	p->ksize = rt_k_dims_prod(w, 2, w->rank);
	p->in_size = rt_k_dims_prod(x, 2, x->rank);
	return 0;
}

static int conv_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct conv_plan *p,
		      char *err, size_t err_cap)
{
	int rc = conv_plan(node, inputs, false, p, err, err_cap);

	if (rc < 0)
		return rc;
	if ((rc = rt_k_window_init(node, &inputs[0], &inputs[1].dims[2], false, true, &p->w, err, err_cap)) < 0)
		return rc;
	p->out_size = 1;
	p->direct = true;
	for (int i = 0; i < p->w.nsp; i++) {
		p->out_size = p->out_size < 0 || p->w.out[i] < 0 ? -1 : p->out_size * p->w.out[i];
		p->direct &= p->w.kernel[i] == 1 && p->w.stride[i] == 1 && p->w.pad_begin[i] == 0 &&
			     p->w.pad_end[i] == 0;
	}
	if (!blas_dim_ok(p->cg * p->ksize) || !blas_dim_ok(p->out_size < 0 ? 0 : p->out_size))
		return rt_k_err(err, err_cap, -ENOTSUP, "Conv dims beyond 2^31 are not supported");
	return 0;
}

/* Conv and ConvTranspose: N x M x spatial output, float. */
static int conv_output_shape(int setup_rc, const struct conv_plan *p, const struct rt_tensor *x, struct rt_tensor *y)
{
	if (setup_rc < 0)
		return setup_rc;
	y->dtype = BW_DTYPE_FLOAT;
	y->rank = x->rank;
	y->dims[0] = p->n;
	y->dims[1] = p->m;
	memcpy(&y->dims[2], p->w.out, (size_t)p->w.nsp * sizeof(int64_t));
	return 0;
}

RT_K_INFER(conv)
{
	struct conv_plan p;

	return conv_output_shape(conv_setup(node, inputs, &p, err, err_cap), &p, &inputs[0], &outputs[0]);
}

RT_K_SCRATCH(conv)
{
	struct conv_plan p;
	char err[RT_ERR_MAX];

	if (conv_setup(node, inputs, &p, err, sizeof(err)) < 0 || p.direct || p.out_size < 0)
		return 0;
	return (size_t)(p.cg * p.ksize * p.out_size) * sizeof(float);
}

/* col[(c * ksize + kk) * out_size + o] = x[c][input position of output o under kernel offset kk] */
static void im2col(const struct conv_plan *p, const float *x, float *col)
{
	const struct rt_k_window *w = &p->w;
	int nsp = w->nsp, last = nsp - 1;
	int64_t in_stride[RT_MAX_RANK], s = 1, orow = w->out[last], outer = p->out_size / (orow ? orow : 1);

	for (int i = last; i >= 0; i--) {
		in_stride[i] = s;
		s *= w->in[i];
	}
	for (int64_t c = 0; c < p->cg; c++) {
		int64_t kk[RT_MAX_RANK] = {0};

		for (int64_t kidx = 0; kidx < p->ksize; kidx++) {
			int64_t o[RT_MAX_RANK] = {0};

			for (int64_t r = 0; r < outer; r++) {
				int64_t off = c * p->in_size;
				bool inside = true;

				for (int i = 0; i < last; i++) {
					int64_t pos = o[i] * w->stride[i] - w->pad_begin[i] + kk[i] * w->dilation[i];

					inside &= pos >= 0 && pos < w->in[i];
					off += pos * in_stride[i];
				}
				{
					int64_t base = -w->pad_begin[last] + kk[last] * w->dilation[last];
					int64_t st = w->stride[last], in = w->in[last];

					for (int64_t j = 0; j < orow; j++) {
						int64_t pos = base + j * st;

						*col++ = inside && pos >= 0 && pos < in ? x[off + pos] : 0.0f;
					}
				}
				for (int i = last - 1; i >= 0; i--) {
					if (++o[i] < w->out[i])
						break;
					o[i] = 0;
				}
			}
			for (int i = last; i >= 0; i--) {
				if (++kk[i] < w->kernel[i])
					break;
				kk[i] = 0;
			}
		}
	}
}

static void add_bias(float *y, const float *bias, int64_t n, int64_t m, int64_t size)
{
	for (int64_t b = 0; b < n; b++) {
		for (int64_t ch = 0; ch < m; ch++) {
			float *ys = y + (b * m + ch) * size;

			for (int64_t i = 0; i < size; i++)
				ys[i] += bias[ch];
		}
	}
}

RT_K_RUN(conv)
{
	struct conv_plan p;
	const float *x = inputs[0].data, *w = inputs[1].data;
	float *y = outputs[0].data, *col = scratch;
	int rc = conv_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (!p.direct && col == NULL && p.out_size > 0)
		return rt_k_err(err, err_cap, -EINVAL, "Conv needs scratch memory and got none");
	for (int64_t b = 0; b < p.n; b++) {
		for (int64_t g = 0; g < p.group; g++) {
			const float *xg = x + (b * p.c + g * p.cg) * p.in_size;
			float *yg = y + (b * p.m + g * p.mg) * p.out_size;

			if (!p.direct)
				im2col(&p, xg, col);
			gemm(BW_DTYPE_FLOAT, false, false, p.mg, p.out_size, p.cg * p.ksize, 1.0f,
			     w + g * p.mg * p.cg * p.ksize, p.cg * p.ksize, p.direct ? xg : col, p.out_size, 0.0f, yg,
			     p.out_size);
		}
	}
	if (rt_k_has_input(node, inputs, 2))
		add_bias(y, inputs[2].data, p.n, p.m, p.out_size);
	return 0;
}

/* ---- ConvTranspose ------------------------------------------------------------------------------- */

static int convt_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct conv_plan *p,
		       char *err, size_t err_cap)
{
	struct rt_k_window *w = &p->w;
	int64_t vals[2 * RT_MAX_RANK], out_pad[RT_MAX_RANK] = {0}, out_shape[RT_MAX_RANK];
	const char *auto_pad = rt_attr_string(node, "auto_pad", "NOTSET");
	unsigned int n, nshape;
	int rc = conv_plan(node, inputs, true, p, err, err_cap), nsp;
	bool same;

	if (rc < 0)
		return rc;
	/* strides, dilations, pads and kernel_shape read as for Conv; the output size is computed below */
	{
		struct rt_tensor fake = inputs[0];

		for (int i = 2; i < fake.rank; i++)
			fake.dims[i] = 1 << 20; /* big enough that Conv's "input smaller than kernel" check passes */
		if ((rc = rt_k_window_init(node, &fake, &inputs[1].dims[2], false, true, w, err, err_cap)) < 0)
			return rc;
	}
	nsp = w->nsp;
	if ((rc = rt_k_attr_ints(node, "output_padding", vals, RT_MAX_RANK, &n, err, err_cap)) < 0)
		return rc;
	if (rc == 1 && n != (unsigned int)nsp)
		return rt_k_err(err, err_cap, -EINVAL, "attribute 'output_padding' has %u values, expected %d", n, nsp);
	for (int i = 0; rc == 1 && i < nsp; i++) {
		if (vals[i] < 0 || vals[i] >= (w->stride[i] > w->dilation[i] ? w->stride[i] : w->dilation[i]))
			return rt_k_err(err, err_cap, -EINVAL, "attribute 'output_padding' must be in [0, max(stride, dilation))");
		out_pad[i] = vals[i];
	}
	if ((rc = rt_k_attr_ints(node, "output_shape", out_shape, RT_MAX_RANK, &nshape, err, err_cap)) < 0)
		return rc;
	if (rc == 1 && nshape == (unsigned int)nsp + 2) { /* the full shape: keep the spatial part */
		memmove(out_shape, out_shape + 2, (size_t)nsp * sizeof(int64_t));
		nshape = (unsigned int)nsp;
	}
	if (rc == 1 && nshape != (unsigned int)nsp)
		return rt_k_err(err, err_cap, -EINVAL, "attribute 'output_shape' has %u values, expected %d", nshape, nsp);
	same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
	p->out_size = 1;
	for (int i = 0; i < nsp; i++) {
		int64_t in = inputs[0].dims[i + 2], eff = (w->kernel[i] - 1) * w->dilation[i] + 1;
		int64_t full = w->stride[i] * (in - 1) + out_pad[i] + eff;

		w->in[i] = in;
		if (in < 0)
			return rt_k_err(err, err_cap, -ENOTSUP, "symbolic spatial dims are not supported");
		if (nshape > 0 || same) {
			int64_t out = nshape > 0 ? out_shape[i] : in * w->stride[i], total = full - out;

			if (total < 0)
				total = 0; /* a larger output_shape is zero-extended at the end */
			if (strcmp(auto_pad, "SAME_UPPER") == 0) {
				w->pad_begin[i] = total / 2;
				w->pad_end[i] = total - total / 2;
			} else {
				w->pad_end[i] = total / 2;
				w->pad_begin[i] = total - total / 2;
			}
			w->out[i] = out;
		} else {
			w->out[i] = full - w->pad_begin[i] - w->pad_end[i];
		}
		if (w->out[i] <= 0)
			return rt_k_err(err, err_cap, -EINVAL, "ConvTranspose output spatial dim %d would be %" PRId64, i,
					w->out[i]);
		p->out_size *= w->out[i];
	}
	if (!blas_dim_ok(p->mg * p->ksize) || !blas_dim_ok(p->in_size))
		return rt_k_err(err, err_cap, -ENOTSUP, "ConvTranspose dims beyond 2^31 are not supported");
	return 0;
}

RT_K_INFER(conv_transpose)
{
	struct conv_plan p;

	return conv_output_shape(convt_setup(node, inputs, &p, err, err_cap), &p, &inputs[0], &outputs[0]);
}

RT_K_SCRATCH(conv_transpose)
{
	struct conv_plan p;
	char err[RT_ERR_MAX];

	if (convt_setup(node, inputs, &p, err, sizeof(err)) < 0)
		return 0;
	return (size_t)(p.mg * p.ksize * p.in_size) * sizeof(float);
}

/* y[m][position of input i under kernel offset kk] += col[(m * ksize + kk) * in_size + i] */
static void col2im(const struct conv_plan *p, const float *col, float *y)
{
	const struct rt_k_window *w = &p->w;
	int nsp = w->nsp;
	int64_t out_stride[RT_MAX_RANK], s = 1;

	for (int i = nsp - 1; i >= 0; i--) {
		out_stride[i] = s;
		s *= w->out[i];
	}
	for (int64_t m = 0; m < p->mg; m++) {
		int64_t kk[RT_MAX_RANK] = {0};

		for (int64_t kidx = 0; kidx < p->ksize; kidx++) {
			int64_t ii[RT_MAX_RANK] = {0};

			for (int64_t i = 0; i < p->in_size; i++, col++) {
				int64_t off = m * p->out_size;
				bool inside = true;

				for (int d = 0; d < nsp; d++) {
					int64_t pos = ii[d] * w->stride[d] - w->pad_begin[d] + kk[d] * w->dilation[d];

					inside &= pos >= 0 && pos < w->out[d];
					off += pos * out_stride[d];
				}
				if (inside)
					y[off] += *col;
				for (int d = nsp - 1; d >= 0; d--) {
					if (++ii[d] < w->in[d])
						break;
					ii[d] = 0;
				}
			}
			for (int d = nsp - 1; d >= 0; d--) {
				if (++kk[d] < w->kernel[d])
					break;
				kk[d] = 0;
			}
		}
	}
}

RT_K_RUN(conv_transpose)
{
	struct conv_plan p;
	const float *x = inputs[0].data, *w = inputs[1].data;
	float *y = outputs[0].data, *col = scratch;
	int rc = convt_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (col == NULL && p.in_size > 0)
		return rt_k_err(err, err_cap, -EINVAL, "ConvTranspose needs scratch memory and got none");
	memset(y, 0, (size_t)(p.n * p.m * p.out_size) * sizeof(float));
	for (int64_t b = 0; b < p.n; b++) {
		for (int64_t g = 0; g < p.group; g++) {
			const float *xg = x + (b * p.c + g * p.cg) * p.in_size;

			/* col [(mg * ksize) x in] = W_g^T [(mg * ksize) x cg] * X_g [cg x in] */
			gemm(BW_DTYPE_FLOAT, true, false, p.mg * p.ksize, p.in_size, p.cg, 1.0f,
			     w + g * p.cg * p.mg * p.ksize, p.mg * p.ksize, xg, p.in_size, 0.0f, col, p.in_size);
			col2im(&p, col, y + (b * p.m + g * p.mg) * p.out_size);
		}
	}
	if (rt_k_has_input(node, inputs, 2))
		add_bias(y, inputs[2].data, p.n, p.m, p.out_size);
	return 0;
}
