/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MatMul, Gemm and batchwire's FusedGemm on OpenBLAS's sgemm/dgemm (sgemv for one row; small
 * untransposed products on gemm_small.c's kernel), the GEMM call conv.c shares, and the activation
 * attributes of the fused ops.
 *
 * Why OpenBLAS: its C API (cblas) is a plain function call on caller-owned memory, which is what a
 * kernel that may not allocate needs: the im2col/col2im buffers come from the arena as scratch.
 * It runs single-threaded when told to (openblas_set_num_threads(1) in rt_cpu_kernels_register),
 * so each executor lcore does its own GEMMs without a thread pool of the library competing for the
 * cores. Debian's oneDNN is built against OpenMP and would bring an OpenMP pool into our worker
 * lcores, with primitive objects to create and cache per shape.
 *
 * OpenBLAS packs its operands itself on every call and has no API to take them pre-packed, so what
 * "pre-packed at load" means here is the layout each call reads fastest, made once by
 * rt_graph_optimize: B as [K, N] for a GEMM (a Gemm's transB=1 weights transposed at load: measured
 * 10-30 % faster than transposed B at 8 and 32 rows, docs/performance.md), and, where a node may see
 * one row, B as [N, K] as well, for the GEMV that a batch of one is.
 */
#include <cblas.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bf16.h"
#include "sgemm.h"

void rt_k_gemm(uint8_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
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
	if (rt_gemm_small_fits(ta, tb, m, n, k)) {
		/* OpenBLAS's small-matrix kernels for these allocate on some CPUs (gemm_small.c) */
		if (dtype == BW_DTYPE_FLOAT)
			rt_gemm_small_f32(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
		else
			rt_gemm_small_f64(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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
		return bw_err(err, err_cap, -EINVAL, "input '%s' must have rank >= 1", a->rank < 1 ? "A" : "B");
	p->m = a->rank == 1 ? 1 : a->dims[a->rank - 2];
	p->k = a->dims[a->rank - 1];
	kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - 2];
	p->n = b->rank == 1 ? 1 : b->dims[b->rank - 1];
	if (p->k != kb && p->k >= 0 && kb >= 0)
		return bw_err(err, err_cap, -EINVAL, "inputs 'A' %s and 'B' %s: inner dims %" PRId64 " and %" PRId64
			      " differ", rt_k_dims_str(a, x, sizeof(x)), rt_k_dims_str(b, y, sizeof(y)), p->k, kb);
	memset(&p->abatch, 0, sizeof(p->abatch));
	memset(&p->bbatch, 0, sizeof(p->bbatch));
	p->abatch.rank = a->rank > 2 ? (uint8_t)(a->rank - 2) : 0;
	p->bbatch.rank = b->rank > 2 ? (uint8_t)(b->rank - 2) : 0;
	memcpy(p->abatch.dims, a->dims, p->abatch.rank * sizeof(int64_t));
	memcpy(p->bbatch.dims, b->dims, p->bbatch.rank * sizeof(int64_t));
	rc = rt_k_broadcast_shape(ins, names, 2, &p->obatch, err, err_cap);
	if (rc < 0)
		return bw_err(err, err_cap, -EINVAL, "batch dims of inputs 'A' %s and 'B' %s do not broadcast",
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
		return bw_err(err, err_cap, -EINVAL, "input 'B' is %s but 'A' is %s", rt_dtype_name(inputs[1].dtype),
			      rt_dtype_name(inputs[0].dtype));
	if ((rc = mm_plan(&inputs[0], &inputs[1], &p, err, err_cap)) < 0)
		return rc;
	if (!rt_k_blas_dim_ok(p.m) && p.m >= 0)
		return bw_err(err, err_cap, -ENOTSUP, "MatMul dims beyond 2^31 are not supported");
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

		rt_k_gemm(a->dtype, false, false, rows, p.n, p.k, 1.0f, a->data, p.k, b->data, p.n, 0.0f, outputs[0].data,
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

			rt_k_gemm(a->dtype, false, false, p.m, p.n, p.k, 1.0f, pa, p.k, pb, p.n, 0.0f, pc, p.n);
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
		return bw_err(err, err_cap, -EINVAL, "input '%s' must be 2-D", a->rank != 2 ? "A" : "B");
	m = a->dims[ta ? 1 : 0];
	k = a->dims[ta ? 0 : 1];
	kb = b->dims[tb ? 1 : 0];
	n = b->dims[tb ? 0 : 1];
	if (k != kb && k >= 0 && kb >= 0)
		return bw_err(err, err_cap, -EINVAL, "inputs 'A' %s and 'B' %s: inner dims %" PRId64 " and %" PRId64
			      " differ (transA %" PRId64 ", transB %" PRId64 ")", rt_k_dims_str(a, x, sizeof(x)),
			      rt_k_dims_str(b, y, sizeof(y)), k, kb, ta, tb);
	if (!rt_k_blas_dim_ok(m < 0 ? 0 : m) || !rt_k_blas_dim_ok(n < 0 ? 0 : n) || !rt_k_blas_dim_ok(k < 0 ? 0 : k))
		return bw_err(err, err_cap, -ENOTSUP, "Gemm dims beyond 2^31 are not supported");
	outputs[0] = (struct rt_tensor){.dtype = a->dtype, .rank = 2, .dims = {m, n}, .data = outputs[0].data};
	if (rt_k_has_input(node, inputs, 2)) {
		const struct rt_tensor *c = &inputs[2];

		if ((rc = rt_k_need_input(node, inputs, 2, "C", RT_DTYPE_BIT(a->dtype), err, err_cap)) < 0)
			return rc;
		/* unidirectional: C broadcasts to [M, N], never the other way */
		if (c->rank > 2 || (c->rank == 2 && c->dims[0] != 1 && c->dims[0] != m) ||
		    (c->rank >= 1 && c->dims[c->rank - 1] != 1 && c->dims[c->rank - 1] != n))
			return bw_err(err, err_cap, -EINVAL, "input 'C' %s does not broadcast to [%" PRId64 ",%" PRId64 "]",
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
	rt_k_gemm(a->dtype, ta, tb, m, n, k, alpha, a->data, a->dims[1], b->data, b->dims[1], beta, y->data, n);
	return 0;
}

/* ---- activation attributes of the fused ops -------------------------------------------------------- */

static const char *const g_act_names[] = {
	[RT_K_ACT_NONE] = "", [RT_K_ACT_RELU] = "Relu", [RT_K_ACT_LEAKY_RELU] = "LeakyRelu",
	[RT_K_ACT_CLIP] = "Clip", [RT_K_ACT_GELU] = "Gelu",
};

const char *rt_k_act_name(enum rt_k_act kind)
{
	return (unsigned int)kind < sizeof(g_act_names) / sizeof(g_act_names[0]) ? g_act_names[kind] : "";
}

int rt_k_act_read(const struct rt_node *node, struct rt_k_act_spec *act, char *err, size_t err_cap)
{
	static const unsigned int nparams[] = {
		[RT_K_ACT_NONE] = 0, [RT_K_ACT_RELU] = 0, [RT_K_ACT_LEAKY_RELU] = 1, [RT_K_ACT_CLIP] = 2,
		[RT_K_ACT_GELU] = 0,
	};
	const char *name = rt_attr_string(node, "activation", "");
	const struct rt_attr *params = rt_node_attr(node, "activation_params");
	unsigned int kind;

	*act = (struct rt_k_act_spec){ .kind = RT_K_ACT_NONE };
	for (kind = 0; kind < sizeof(g_act_names) / sizeof(g_act_names[0]); kind++) {
		if (strcmp(name, g_act_names[kind]) == 0)
			break;
	}
	if (kind == sizeof(g_act_names) / sizeof(g_act_names[0]))
		return bw_err(err, err_cap, -ENOTSUP, "attribute 'activation' '%s' is not supported", name);
	act->kind = (enum rt_k_act)kind;
	if (nparams[kind] == 0)
		return 0;
	if (params == NULL || params->type != RT_ATTR_FLOATS || params->count != nparams[kind])
		return bw_err(err, err_cap, -EINVAL, "attribute 'activation_params' must be %u floats for %s",
			      nparams[kind], name);
	act->a = params->floats[0];
	act->b = nparams[kind] > 1 ? params->floats[1] : 0.0f;
	return 0;
}

/* ---- FusedGemm ----------------------------------------------------------------------------------- */

/*
 * B as the node sees it: [K, N] as given, or, with "packed_weights", the shape "weight_shape" says
 * of the panels sgemm.c's rt_sg_pack_b (fp32) or the tiles amx.c's rt_bf16_pack_b (bf16) made at
 * load (input B is then 1-D).
 */
static int gemm_weights(const struct rt_node *node, const struct rt_tensor *b, struct rt_tensor *shape, int *packed,
			char *err, size_t err_cap)
{
	const struct rt_attr *ws = rt_node_attr(node, "weight_shape");
	size_t elems;

	*packed = (int)rt_attr_int(node, "packed_weights", 0);
	*shape = *b;
	if (*packed == 0)
		return 0;
	if (*packed != RT_K_PACKED_FP32 && *packed != RT_K_PACKED_BF16)
		return bw_err(err, err_cap, -EINVAL, "attribute 'packed_weights' %d is neither %d (fp32) nor %d (bf16)",
			      *packed, RT_K_PACKED_FP32, RT_K_PACKED_BF16);
	if (ws == NULL || ws->type != RT_ATTR_INTS || ws->count != 2 || ws->ints[0] < 0 || ws->ints[1] < 0)
		return bw_err(err, err_cap, -EINVAL, "attribute 'weight_shape' must be 2 ints with packed weights");
	*shape = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = {ws->ints[0], ws->ints[1]} };
	if (*packed == RT_K_PACKED_BF16) {
		elems = rt_bf16_packed_b_elems(ws->ints[0], ws->ints[1]);
		if (b->dtype != BW_DTYPE_BFLOAT16 || rt_tensor_elems(b) != (int64_t)elems)
			return bw_err(err, err_cap, -EINVAL, "input 'B' must hold %zu packed bf16 values", elems);
		return 0;
	}
	elems = rt_sg_packed_b_floats(ws->ints[0], ws->ints[1]);
	if (b->dtype != BW_DTYPE_FLOAT || rt_tensor_elems(b) != (int64_t)elems)
		return bw_err(err, err_cap, -EINVAL, "input 'B' must hold %zu packed floats", elems);
	return 0;
}

RT_K_INFER(fused_gemm)
{
	const struct rt_tensor *a = &inputs[0];
	struct rt_tensor b;
	struct rt_k_act_spec act;
	int64_t k, n, rows;
	float alpha;
	int packed;
	char x[96], y[96];
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "A", RT_DTYPE_BIT(BW_DTYPE_FLOAT) | RT_DTYPE_BIT(BW_DTYPE_BFLOAT16),
				  err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "B", RT_DTYPE_BIT(BW_DTYPE_FLOAT) | RT_DTYPE_BIT(BW_DTYPE_BFLOAT16),
				  err, err_cap)) < 0 ||
	    (rc = gemm_weights(node, &inputs[1], &b, &packed, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_float(node, "alpha", 1.0f, &alpha, err, err_cap)) < 0 ||
	    (rc = rt_k_act_read(node, &act, err, err_cap)) < 0)
		return rc;
	if (a->rank < 1 || b.rank != 2)
		return bw_err(err, err_cap, -EINVAL, "input 'A' must have rank >= 1 and 'B' rank 2");
	k = b.dims[0];
	n = b.dims[1];
	rows = rt_k_dims_prod(a, 0, a->rank - 1);
	if (a->dims[a->rank - 1] != k || k < 0 || n < 0)
		return bw_err(err, err_cap, -EINVAL, "inputs 'A' %s and 'B' %s: inner dims differ",
			      rt_k_dims_str(a, x, sizeof(x)), rt_k_dims_str(&b, y, sizeof(y)));
	if (!rt_k_blas_dim_ok(k) || !rt_k_blas_dim_ok(n) || !rt_k_blas_dim_ok(rows < 0 ? 0 : rows))
		return bw_err(err, err_cap, -ENOTSUP, "FusedGemm dims beyond 2^31 are not supported");
	if (rt_k_has_input(node, inputs, 2)) {
		if ((rc = rt_k_need_input(node, inputs, 2, "C", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0)
			return rc;
		if (inputs[2].rank != 1 || inputs[2].dims[0] != n)
			return bw_err(err, err_cap, -EINVAL, "input 'C' must be 1-D of %" PRId64 " values", n);
	}
	if (rt_k_has_input(node, inputs, 3)) {
		if ((rc = rt_k_need_input(node, inputs, 3, "Bt", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0)
			return rc;
		if (inputs[3].rank != 2 || inputs[3].dims[0] != n || inputs[3].dims[1] != k)
			return bw_err(err, err_cap, -EINVAL, "input 'Bt' must be [%" PRId64 ",%" PRId64 "]", n, k);
	}
	if (packed == RT_K_PACKED_BF16 && !rt_bf16_available())
		return bw_err(err, err_cap, -ENOTSUP, "bf16 packed weights need the CPU kernels at the amx level");
	if (packed == RT_K_PACKED_FP32 && !rt_sg_available())
		return bw_err(err, err_cap, -ENOTSUP, "packed weights need AVX2 and FMA");
	if (packed == RT_K_PACKED_FP32 && rows >= 0 && rows < RT_SG_ROWS_MIN && !rt_k_has_input(node, inputs, 3))
		return bw_err(err, err_cap, -EINVAL, "%" PRId64 " rows with packed weights need input 'Bt'", rows);
	/* bf16 activations in and out: read in place by the tiles, the depth a whole number of tiles */
	if (a->dtype == BW_DTYPE_BFLOAT16 && (packed != RT_K_PACKED_BF16 || k % 32 != 0))
		return bw_err(err, err_cap, -EINVAL, "a bf16 input 'A' needs bf16 packed weights of a depth that is a "
			      "multiple of 32 (not %" PRId64 ")", k);
	if (rt_attr_int(node, "output_bf16", 0) != 0 && packed != RT_K_PACKED_BF16)
		return bw_err(err, err_cap, -EINVAL, "attribute 'output_bf16' needs bf16 packed weights");
	outputs[0] = *a;
	outputs[0].data = NULL;
	outputs[0].dims[a->rank - 1] = n;
	outputs[0].dtype = rt_attr_int(node, "output_bf16", 0) != 0 ? BW_DTYPE_BFLOAT16 : BW_DTYPE_FLOAT;
	return 0;
}

RT_K_SCRATCH(fused_gemm)
{
	struct rt_tensor b;
	char err[RT_ERR_MAX];
	int packed;

	if (gemm_weights(node, &inputs[1], &b, &packed, err, sizeof(err)) < 0 || packed == 0)
		return 0;
	if (packed == RT_K_PACKED_BF16)
		return inputs[0].dtype == BW_DTYPE_BFLOAT16 ? 0 :
		       rt_bf16_scratch_bytes(rt_k_dims_prod(&inputs[0], 0, inputs[0].rank - 1), b.dims[0]);
	return rt_sg_scratch_a_floats(b.dims[0]) * sizeof(float);
}

/*
 * Packed weights and enough rows: sgemm.c, the bias, alpha and activation on the tiles. Otherwise
 * OpenBLAS: the bias written into every row of Y first and the GEMM accumulating into it (beta 1),
 * then the activation over Y; one row with Bt is a GEMV over Bt's rows (dot products along K).
 */
RT_K_RUN(fused_gemm)
{
	const struct rt_tensor *a = &inputs[0];
	struct rt_tensor b;
	int64_t k, n, rows = rt_k_dims_prod(a, 0, a->rank - 1);
	float alpha = rt_attr_float(node, "alpha", 1.0f), beta = 0.0f;
	const float *bias = rt_k_has_input(node, inputs, 2) ? inputs[2].data : NULL;
	bool has_bt = rt_k_has_input(node, inputs, 3);
	struct rt_k_act_spec act;
	float *y = outputs[0].data;
	int packed, rc = gemm_weights(node, &inputs[1], &b, &packed, err, err_cap);

	if (rc < 0 || (rc = rt_k_act_read(node, &act, err, err_cap)) < 0)
		return rc;
	k = b.dims[0];
	n = b.dims[1];
	if (packed == RT_K_PACKED_BF16) {
		static const int64_t no_offset[1] = { 0 };
		struct rt_bf16_epilogue ep = { .alpha = alpha, .bias = bias, .act = act, .ldc = n,
					       .c_fp32 = outputs[0].dtype == BW_DTYPE_FLOAT };
		struct rt_bf16_grid dense = { .per_image = rows, .width = rows, .valid_h = 1, .valid_w = rows };

		if (a->dtype == BW_DTYPE_BFLOAT16) {
			rt_bf16_gemm_rows(rows, n, &(struct rt_bf16_rows){ a->data, k, k, 1, no_offset }, &dense,
					  inputs[1].data, &ep, outputs[0].data);
			return 0;
		}
		if (scratch == NULL)
			return bw_err(err, err_cap, -EINVAL, "FusedGemm needs scratch memory and got none");
		rt_bf16_gemm_a32(rows, n, k, a->data, k, inputs[1].data, &ep, outputs[0].data, scratch);
		return 0;
	}
	if (packed && rows >= RT_SG_ROWS_MIN) {
		if (scratch == NULL)
			return bw_err(err, err_cap, -EINVAL, "FusedGemm needs scratch memory and got none");
		rt_sg_gemm_bpacked(rows, n, k, a->data, k, inputs[1].data, y, n, alpha, bias, &act, scratch);
		return 0;
	}
	if (bias != NULL) {
		rt_vm_fill_rows(y, bias, NULL, rows, n);
		beta = 1.0f;
	}
	if (has_bt && (rows == 1 || packed))
		rt_k_gemm(BW_DTYPE_FLOAT, false, true, rows, n, k, alpha, a->data, k, inputs[3].data, k, beta, y, n);
	else
		rt_k_gemm(BW_DTYPE_FLOAT, false, false, rows, n, k, alpha, a->data, k, inputs[1].data, n, beta, y, n);
	rt_vm_act(y, rows * n, &act);
	return 0;
}

/* ---- FusedMatMul: MatMul with its operands' and product's Reshape/Transpose and a scale folded -------- */

#define FMM_RANK_MAX 4

/* One operand (or the product) as strides over the memory of the tensor the node actually gets. */
struct fmm_view {
	int rank;
	int64_t dims[FMM_RANK_MAX];
	int64_t strides[FMM_RANK_MAX]; /* elements */
};

/*
 * ONNX Reshape (allowzero 0: a 0 copies the dim at its index, one -1 is inferred) of a contiguous
 * tensor of src's shape, then Transpose by perm: a strided view of src's memory.
 */
static int fmm_view_of(const struct rt_tensor *src, const struct rt_attr *shape, const struct rt_attr *perm,
		       struct fmm_view *v, const char *what, char *err, size_t err_cap)
{
	int64_t dims[FMM_RANK_MAX], strides[FMM_RANK_MAX], total = rt_tensor_elems(src), known = 1, s = 1;
	int rank = src->rank, neg = -1;

	if (shape != NULL) {
		if (shape->type != RT_ATTR_INTS || shape->count < 1 || shape->count > FMM_RANK_MAX)
			return bw_err(err, err_cap, -EINVAL, "attribute '%s_shape' must be 1 to %d ints", what, FMM_RANK_MAX);
		rank = (int)shape->count;
		for (int d = 0; d < rank; d++) {
			dims[d] = shape->ints[d];
			if (dims[d] == 0 && d < src->rank)
				dims[d] = src->dims[d];
			if (dims[d] == -1 && neg < 0)
				neg = d;
			else if (dims[d] < 0)
				return bw_err(err, err_cap, -EINVAL, "attribute '%s_shape' has a bad dim", what);
			else
				known *= dims[d];
		}
		if (neg >= 0)
			dims[neg] = known > 0 ? total / known : 0;
		if (neg >= 0 ? known * dims[neg] != total : known != total)
			return bw_err(err, err_cap, -EINVAL, "attribute '%s_shape' does not fit the input", what);
	} else {
		if (rank > FMM_RANK_MAX)
			return bw_err(err, err_cap, -ENOTSUP, "input '%s' of rank %d > %d", what, rank, FMM_RANK_MAX);
		memcpy(dims, src->dims, (size_t)rank * sizeof(int64_t));
	}
	for (int d = rank - 1; d >= 0; d--) {
		strides[d] = s;
		s *= dims[d];
	}
	v->rank = rank;
	for (int d = 0; d < rank; d++) {
		int64_t p = d;

		if (perm != NULL) {
			if (perm->type != RT_ATTR_INTS || perm->count != (uint32_t)rank || perm->ints[d] < 0 ||
			    perm->ints[d] >= rank)
				return bw_err(err, err_cap, -EINVAL, "attribute '%s_perm' must permute %d dims", what, rank);
			p = perm->ints[d];
		}
		v->dims[d] = dims[p];
		v->strides[d] = strides[p];
	}
	return 0;
}

/* A matrix view's BLAS form: row-major with leading dimension ld, or transposed. */
static bool fmm_blas(const struct fmm_view *v, bool *trans, int64_t *ld)
{
	int64_t rs = v->strides[v->rank - 2], cs = v->strides[v->rank - 1];
	int64_t rows = v->dims[v->rank - 2], cols = v->dims[v->rank - 1];

	if (cs == 1 || cols == 1) {
		*trans = false;
		*ld = rows == 1 ? (cols > 0 ? cols : 1) : rs;
		return *ld >= (cols > 0 ? cols : 1) || rows == 1;
	}
	if (rs == 1 || rows == 1) {
		*trans = true;
		*ld = cols == 1 ? (rows > 0 ? rows : 1) : cs;
		return *ld >= (rows > 0 ? rows : 1) || cols == 1;
	}
	return false;
}

struct fmm_plan {
	struct fmm_view a, b, y;   /* y: the product [batch..., M, N] as strides into the output */
	struct rt_tensor out;      /* the node's output shape */
	int64_t m, n, k, batch[FMM_RANK_MAX - 2];
	int nbatch;
	bool ta, tb;
	int64_t lda, ldb, ldc;
	float alpha;
	bool bias;                           /* input C: a row added to every row of each product */
	int64_t bias_strides[FMM_RANK_MAX - 2]; /* C's per batch dim, 0 where it broadcasts */
};

/* Attribute prefix + name of node (FusedAttention's two products: "s_" and "c_"). */
static const struct rt_attr *fmm_attr(const struct rt_node *node, const char *prefix, const char *name)
{
	char full[32];

	snprintf(full, sizeof(full), "%s%s", prefix, name);
	return rt_node_attr(node, full);
}

/*
 * The product a . b (+ c) as the attributes named prefix + "a_shape", ... describe it. a and b are
 * float tensors; c is NULL or the row added to every row of each product.
 */
static int fmm_setup_named(const struct rt_node *node, const char *prefix, const struct rt_tensor *a,
			   const struct rt_tensor *b, const struct rt_tensor *c, struct fmm_plan *p, char *err,
			   size_t err_cap)
{
	struct rt_tensor prod = { .dtype = BW_DTYPE_FLOAT };
	const struct rt_attr *alpha = fmm_attr(node, prefix, "alpha"), *y_perm = fmm_attr(node, prefix, "y_perm");
	struct fmm_view t;
	int rc, r;
	bool tc;

	memset(p, 0, sizeof(*p));
	if (a->dtype != BW_DTYPE_FLOAT || b->dtype != BW_DTYPE_FLOAT || (c != NULL && c->dtype != BW_DTYPE_FLOAT))
		return bw_err(err, err_cap, -EINVAL, "the operands must be float");
	if (alpha != NULL && alpha->type != RT_ATTR_FLOAT)
		return bw_err(err, err_cap, -EINVAL, "attribute '%salpha' must be a float", prefix);
	p->alpha = alpha != NULL ? alpha->f : 1.0f;
	if ((rc = fmm_view_of(a, fmm_attr(node, prefix, "a_shape"), fmm_attr(node, prefix, "a_perm"), &p->a, "a", err,
			      err_cap)) < 0 ||
	    (rc = fmm_view_of(b, fmm_attr(node, prefix, "b_shape"), fmm_attr(node, prefix, "b_perm"), &p->b, "b", err,
			      err_cap)) < 0)
		return rc;
	r = p->a.rank;
	if (r < 2 || p->b.rank != r)
		return bw_err(err, err_cap, -ENOTSUP, "operands of ranks %d and %d (equal, >= 2, wanted)", r, p->b.rank);
	p->m = p->a.dims[r - 2];
	p->k = p->a.dims[r - 1];
	p->n = p->b.dims[r - 1];
	if (p->b.dims[r - 2] != p->k)
		return bw_err(err, err_cap, -EINVAL, "inner dims %" PRId64 " and %" PRId64 " differ", p->k, p->b.dims[r - 2]);
	p->nbatch = r - 2;
	for (int d = 0; d < p->nbatch; d++) {
		if (p->a.dims[d] != p->b.dims[d])
			return bw_err(err, err_cap, -ENOTSUP, "batch dims must be equal (no broadcasting)");
		p->batch[d] = p->a.dims[d];
	}
	if (!fmm_blas(&p->a, &p->ta, &p->lda) || !fmm_blas(&p->b, &p->tb, &p->ldb))
		return bw_err(err, err_cap, -ENOTSUP, "an operand's matrices are not row- or column-contiguous");
	if (!rt_k_blas_dim_ok(p->m) || !rt_k_blas_dim_ok(p->n) || !rt_k_blas_dim_ok(p->k) ||
	    !rt_k_blas_dim_ok(p->lda) || !rt_k_blas_dim_ok(p->ldb))
		return bw_err(err, err_cap, -ENOTSUP, "FusedMatMul dims beyond 2^31 are not supported");
	/* the product, transposed by y_perm, is the output's memory (y_shape only renames its dims) */
	prod.rank = (uint8_t)r;
	memcpy(prod.dims, p->a.dims, (size_t)p->nbatch * sizeof(int64_t));
	prod.dims[r - 2] = p->m;
	prod.dims[r - 1] = p->n;
	if ((rc = fmm_view_of(&prod, NULL, y_perm, &t, "y", err, err_cap)) < 0)
		return rc;
	/* t: the transposed product's dims; its memory is contiguous, and product dim perm[d] is t's d */
	{
		const struct rt_attr *perm = y_perm;
		int64_t s = 1, cstrides[FMM_RANK_MAX];

		for (int d = r - 1; d >= 0; d--) {
			cstrides[d] = s;
			s *= t.dims[d];
		}
		p->y.rank = r;
		memcpy(p->y.dims, prod.dims, (size_t)r * sizeof(int64_t));
		for (int d = 0; d < r; d++)
			p->y.strides[perm != NULL ? perm->ints[d] : d] = cstrides[d];
		p->out = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = (uint8_t)r };
		memcpy(p->out.dims, t.dims, (size_t)r * sizeof(int64_t));
	}
	if (!fmm_blas(&p->y, &tc, &p->ldc) || tc)
		return bw_err(err, err_cap, -ENOTSUP, "the product's rows are not contiguous in the output");
	/* C: [batch'..., 1, N] with each batch' dim the product's or 1 (attention's mask, [B, 1, 1, S]) */
	if (c != NULL) {
		int64_t s = c->rank == r ? c->dims[r - 1] : 0;

		if (c->rank != r || c->dims[r - 2] != 1 || c->dims[r - 1] != p->n)
			return bw_err(err, err_cap, -EINVAL, "input 'C' must be of rank %d with [..., 1, %" PRId64 "] last", r,
				      p->n);
		for (int d = p->nbatch - 1; d >= 0; d--) {
			if (c->dims[d] != 1 && c->dims[d] != p->batch[d])
				return bw_err(err, err_cap, -EINVAL, "input 'C' dim %d is %" PRId64 ", not 1 or %" PRId64, d,
					      c->dims[d], p->batch[d]);
			p->bias_strides[d] = c->dims[d] == 1 ? 0 : s;
			s *= c->dims[d];
		}
		p->bias = true;
	}
	if (fmm_attr(node, prefix, "y_shape") != NULL) {
		struct fmm_view o;

		if ((rc = fmm_view_of(&p->out, fmm_attr(node, prefix, "y_shape"), NULL, &o, "y", err, err_cap)) < 0)
			return rc;
		p->out.rank = (uint8_t)o.rank;
		memcpy(p->out.dims, o.dims, (size_t)o.rank * sizeof(int64_t));
	}
	return 0;
}

static int fmm_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct fmm_plan *p, char *err,
		     size_t err_cap)
{
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "A", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "B", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rt_k_has_input(node, inputs, 2) &&
	     (rc = rt_k_need_input(node, inputs, 2, "C", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0))
		return rc;
	return fmm_setup_named(node, "", &inputs[0], &inputs[1], rt_k_has_input(node, inputs, 2) ? &inputs[2] : NULL, p,
			       err, err_cap);
}

RT_K_INFER(fused_matmul)
{
	struct fmm_plan p;
	int rc = fmm_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	outputs[0] = p.out;
	return 0;
}

/*
 * batchwire's GEMM when the CPU has it, A is row-contiguous and B small enough to pack whole for
 * each batch index (attention's 32 x 128 and 128 x 32: OpenBLAS runs these small products at a
 * third of the speed); OpenBLAS otherwise.
 */
#define FMM_PACKED_B_FLOATS_MAX (1 << 20)

static bool fmm_own_gemm(const struct fmm_plan *p)
{
	return rt_sg_available() && !p->ta && p->m >= RT_SG_ROWS_MIN &&
	       rt_sg_packed_b_floats(p->k, p->n) <= FMM_PACKED_B_FLOATS_MAX;
}

/*
 * gemm_small.c's direct GEMM, both operands read in place: A row-contiguous, B row-major (its
 * columns adjacent), no row to add, and B (at most FMM_SMALL_B_FLOATS) stays in L1 or L2 while
 * every tile of rows reads it. Attention's context product (128 x 128 scores . V's 128 x 32) packed
 * V and then the scores' rows into panels for two column panels: 18.6 us a head plus 2.3 for V's
 * packing, against 12.3 read in place (alternating runs on an AMD EPYC).
 */
#define FMM_SMALL_B_FLOATS (16 * 1024)

static bool fmm_small(const struct fmm_plan *p)
{
	return rt_sg_available() && !p->ta && !p->bias && p->b.strides[p->b.rank - 1] == 1 &&
	       p->k * p->n <= FMM_SMALL_B_FLOATS && rt_gemm_small_fits(false, false, p->m, p->n, p->k);
}

/* Attribute "bf16" (precision bf16) on a CPU at the amx level: AMX's tiles for any row-contiguous A. */
static bool fmm_bf16(const struct rt_node *node, const struct fmm_plan *p)
{
	return rt_attr_int(node, "bf16", 0) != 0 && rt_bf16_available() && !p->ta &&
	       rt_bf16_packed_b_elems(p->k, p->n) <= 2 * FMM_PACKED_B_FLOATS_MAX;
}

/* The packed B's bytes, rounded to the 64 bytes the A scratch after it starts at. */
static size_t fmm_bf16_b_bytes(const struct fmm_plan *p)
{
	return (rt_bf16_packed_b_elems(p->k, p->n) * sizeof(uint16_t) + 63) / 64 * 64;
}

/* How each product of a plan is computed: AMX's tiles, batchwire's packed or direct GEMM, or OpenBLAS. */
enum fmm_how { FMM_BLAS, FMM_OWN, FMM_SMALL, FMM_BF16 };

static enum fmm_how fmm_how(const struct rt_node *node, const struct fmm_plan *p)
{
	return fmm_bf16(node, p) ? FMM_BF16 : fmm_small(p) ? FMM_SMALL : fmm_own_gemm(p) ? FMM_OWN : FMM_BLAS;
}

static size_t fmm_scratch_bytes(const struct fmm_plan *p, enum fmm_how how)
{
	switch (how) {
	case FMM_BF16: return fmm_bf16_b_bytes(p) + rt_bf16_scratch_bytes(p->m, p->k);
	case FMM_OWN: return (rt_sg_packed_b_floats(p->k, p->n) + rt_sg_scratch_a_floats(p->k)) * sizeof(float);
	default: return 0;
	}
}

RT_K_SCRATCH(fused_matmul)
{
	struct fmm_plan p;
	char err[RT_ERR_MAX];

	if (fmm_setup(node, inputs, &p, err, sizeof(err)) < 0)
		return 0;
	return fmm_scratch_bytes(&p, fmm_how(node, &p));
}

/* Element offsets of batch index idx in a, b, the product and the row C (a plan's strides). */
struct fmm_at {
	int64_t a, b, y, c;
};

static struct fmm_at fmm_offsets(const struct fmm_plan *p, const int64_t *idx)
{
	struct fmm_at at = { 0 };

	for (int d = 0; d < p->nbatch; d++) {
		at.a += idx[d] * p->a.strides[d];
		at.b += idx[d] * p->b.strides[d];
		at.y += idx[d] * p->y.strides[d];
		at.c += idx[d] * p->bias_strides[d];
	}
	return at;
}

/* B's strides along k and n (elements), as a plan's view gives them. */
static void fmm_b_strides(const struct fmm_plan *p, int64_t *ks, int64_t *ns)
{
	*ks = p->b.strides[p->b.rank - 2];
	*ns = p->b.strides[p->b.rank - 1];
}

/* One product: y (rows ldc apart) = alpha * a . b (+ row in every row), as how says. */
static void fmm_product(const struct fmm_plan *p, enum fmm_how how, const float *a, const float *b, const float *row,
			float *y, int64_t ldc, void *scratch)
{
	static const struct rt_k_act_spec none = { .kind = RT_K_ACT_NONE };
	int64_t bks, bns;

	fmm_b_strides(p, &bks, &bns);

	switch (how) {
	case FMM_BF16:
		rt_bf16_pack_b_fast(b, bks, bns, p->k, p->n, scratch);
		rt_bf16_gemm_bpacked(p->m, p->n, p->k, a, p->lda, scratch, y, ldc, p->alpha, row, &none,
				     (char *)scratch + fmm_bf16_b_bytes(p));
		break;
	case FMM_OWN: {
		float *bp = scratch;

		rt_sg_pack_b_strided(b, bks, bns, p->k, p->n, bp);
		rt_sg_gemm_bpacked(p->m, p->n, p->k, a, p->lda, bp, y, ldc, p->alpha, row, &none,
				   bp + rt_sg_packed_b_floats(p->k, p->n));
		break;
	}
	case FMM_SMALL: /* no row (fmm_small), B's columns adjacent: its rows bks apart */
		rt_gemm_small_f32(p->m, p->n, p->k, p->alpha, a, p->lda, b, bks, 0.0f, y, ldc);
		break;
	default: {
		float beta = 0.0f;

		/* OpenBLAS: the row written into each row of Y first, the product accumulated onto it */
		for (int64_t r = 0; row != NULL && r < p->m; r++) {
			memcpy(y + r * ldc, row, (size_t)p->n * sizeof(float));
			beta = 1.0f;
		}
		rt_k_gemm(BW_DTYPE_FLOAT, p->ta, p->tb, p->m, p->n, p->k, p->alpha, a, p->lda, b, p->ldb, beta, y, ldc);
		break;
	}
	}
}

/* The next batch index (row-major over the plan's batch dims). */
static void fmm_next(const struct fmm_plan *p, int64_t *idx)
{
	for (int d = p->nbatch - 1; d >= 0; d--) {
		if (++idx[d] < p->batch[d])
			return;
		idx[d] = 0;
	}
}

static int64_t fmm_count(const struct fmm_plan *p)
{
	int64_t count = 1;

	for (int d = 0; d < p->nbatch; d++)
		count *= p->batch[d];
	return count;
}

/* One GEMM per batch index, each operand and the product read and written in place through strides. */
RT_K_RUN(fused_matmul)
{
	const float *a = inputs[0].data, *b = inputs[1].data;
	float *y = outputs[0].data;
	int64_t idx[FMM_RANK_MAX - 2] = { 0 }, count;
	struct fmm_plan p;
	enum fmm_how how;
	int rc = fmm_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	how = fmm_how(node, &p);
	if (how != FMM_BLAS && scratch == NULL)
		how = FMM_BLAS;
	count = fmm_count(&p);
	for (int64_t i = 0; i < count; i++, fmm_next(&p, idx)) {
		struct fmm_at at = fmm_offsets(&p, idx);

		fmm_product(&p, how, a + at.a, b + at.b, p.bias ? (const float *)inputs[2].data + at.c : NULL, y + at.y,
			    p.ldc, scratch);
	}
	return 0;
}

/* ---- FusedAttention: the scores' FusedMatMul, the Softmax and the context's FusedMatMul in one -------- */

/*
 * The two products of FusedAttention(Q, K, Mask?, V): the scores (attributes s_*: Q . K with the
 * mask row, scaled) and the context (c_*: the softmax of the scores . V). The scores are one batch
 * index's [m, n] in scratch, never in the arena; the context's A is that matrix as it is.
 */
struct fattn_plan {
	struct fmm_plan s, c;
	enum fmm_how s_how, c_how;
	size_t s_bytes; /* the scores matrix in scratch, rounded to 64 */
};

static int fattn_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct fattn_plan *p, char *err,
		       size_t err_cap)
{
	struct rt_tensor scores;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "Q", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "K", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 3, "V", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rt_k_has_input(node, inputs, 2) &&
	     (rc = rt_k_need_input(node, inputs, 2, "Mask", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0))
		return rc;
	if (fmm_attr(node, "s_", "y_perm") != NULL || fmm_attr(node, "s_", "y_shape") != NULL ||
	    fmm_attr(node, "c_", "a_shape") != NULL || fmm_attr(node, "c_", "a_perm") != NULL)
		return bw_err(err, err_cap, -EINVAL, "the scores must be the context's A as they are");
	if ((rc = fmm_setup_named(node, "s_", &inputs[0], &inputs[1], rt_k_has_input(node, inputs, 2) ? &inputs[2] : NULL,
				  &p->s, err, err_cap)) < 0)
		return rc;
	scores = p->s.out;
	if ((rc = fmm_setup_named(node, "c_", &scores, &inputs[3], NULL, &p->c, err, err_cap)) < 0)
		return rc;
	if (p->c.nbatch != p->s.nbatch || memcmp(p->c.batch, p->s.batch, (size_t)p->s.nbatch * sizeof(int64_t)) != 0)
		return bw_err(err, err_cap, -EINVAL, "the two products' batch dims differ");
	p->s_how = fmm_how(node, &p->s);
	p->c_how = fmm_how(node, &p->c);
	p->s_bytes = ((size_t)(p->s.m * p->s.n) * sizeof(float) + 63) / 64 * 64;
	return 0;
}

RT_K_INFER(fused_attention)
{
	struct fattn_plan p;
	int rc = fattn_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	outputs[0] = p.c.out;
	return 0;
}

/* Both products on AMX's tiles: the head in one rt_bf16_attention, K and V packed for it. */
static bool fattn_tiles(const struct fattn_plan *p)
{
	return p->s_how == FMM_BF16 && p->c_how == FMM_BF16;
}

RT_K_SCRATCH(fused_attention)
{
	struct fattn_plan p;
	char err[RT_ERR_MAX];
	size_t s, c;

	if (fattn_setup(node, inputs, &p, err, sizeof(err)) < 0)
		return 0;
	if (fattn_tiles(&p))
		return fmm_bf16_b_bytes(&p.s) + fmm_bf16_b_bytes(&p.c) + rt_bf16_attention_scratch_bytes(p.s.n, p.s.k);
	s = fmm_scratch_bytes(&p.s, p.s_how);
	c = fmm_scratch_bytes(&p.c, p.c_how);
	return p.s_bytes + (s > c ? s : c);
}

/* Each head: Kᵀ and V rounded into tiles, then rt_bf16_attention (scores, softmax, context). */
static void fattn_run_tiles(const struct fattn_plan *p, const float *q, const float *k, const float *mask,
			    const float *v, float *y, void *scratch)
{
	uint16_t *k_tiles = scratch, *v_tiles = (uint16_t *)((char *)scratch + fmm_bf16_b_bytes(&p->s));
	void *work = (char *)v_tiles + fmm_bf16_b_bytes(&p->c);
	int64_t idx[FMM_RANK_MAX - 2] = { 0 }, count = fmm_count(&p->s), sks, sns, cks, cns;

	fmm_b_strides(&p->s, &sks, &sns);
	fmm_b_strides(&p->c, &cks, &cns);
	for (int64_t i = 0; i < count; i++, fmm_next(&p->s, idx)) {
		struct fmm_at s = fmm_offsets(&p->s, idx), c = fmm_offsets(&p->c, idx);
		struct rt_bf16_attention at = {
			.m = p->s.m, .n = p->s.n, .d = p->s.k, .dv = p->c.n, .q = q + s.a, .ldq = p->s.lda,
			.k_tiles = k_tiles, .v_tiles = v_tiles, .mask = mask != NULL ? mask + s.c : NULL,
			.alpha = p->s.alpha, .c_alpha = p->c.alpha, .y = y + c.y, .ldy = p->c.ldc,
		};

		rt_bf16_pack_b_fast(k + s.b, sks, sns, p->s.k, p->s.n, k_tiles);
		rt_bf16_pack_b_fast(v + c.b, cks, cns, p->c.k, p->c.n, v_tiles);
		rt_bf16_attention(&at, work);
	}
}

/*
 * Per batch index (a sequence's head): the scores into scratch, softmax over each row there, then
 * the context from them, so the scores stay in L1/L2: written to the arena and read back twice,
 * they were 25 MiB a layer for the transformer at a batch of 32.
 */
RT_K_RUN(fused_attention)
{
	const float *q = inputs[0].data, *k = inputs[1].data, *v = inputs[3].data;
	const float *mask = rt_k_has_input(node, inputs, 2) ? inputs[2].data : NULL;
	float *y = outputs[0].data, *scores = scratch;
	int64_t idx[FMM_RANK_MAX - 2] = { 0 }, count;
	struct fattn_plan p;
	int rc = fattn_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (scratch == NULL)
		return bw_err(err, err_cap, -EINVAL, "FusedAttention needs scratch memory and got none");
	if (fattn_tiles(&p)) {
		fattn_run_tiles(&p, q, k, mask, v, y, scratch);
		return 0;
	}
	count = fmm_count(&p.s);
	for (int64_t i = 0; i < count; i++, fmm_next(&p.s, idx)) {
		struct fmm_at s = fmm_offsets(&p.s, idx), c = fmm_offsets(&p.c, idx);

		fmm_product(&p.s, p.s_how, q + s.a, k + s.b, mask != NULL ? mask + s.c : NULL, scores, p.s.n,
			    (char *)scratch + p.s_bytes);
		rt_vm_softmax_rows(scores, scores, p.s.m, p.s.n);
		fmm_product(&p.c, p.c_how, scores, v + c.b, NULL, y + c.y, p.c.ldc, (char *)scratch + p.s_bytes);
	}
	return 0;
}

