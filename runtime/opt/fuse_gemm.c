/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MatMul or Gemm with a constant B (+ Add of a bias over rows) (+ Relu / LeakyRelu / Clip, or the erf
 * GELU) -> FusedGemm, its weights pre-packed at load.
 *
 * What qualifies: a MatMul whose B is a constant matrix (any A: its leading dims are rows), or a Gemm
 * with transA 0, a constant B and a C that is a row bias (N values, [N] or [1, N], or one value). A
 * bias from a following Add must be a constant of N values whose rank does not exceed the product's
 * (else the Add would broadcast the output to a larger rank). beta * C is computed once, here; alpha
 * stays an attribute.
 *
 * Pre-packing: FusedGemm's B is [K, N], what the GEMM reads without a transpose (a Gemm's transB=1
 * weights transposed once, here); where the product may have one row (a batch of one through an
 * MLP) and N < OPT_GEMV_BT_N_MAX, the [N, K] copy too: OpenBLAS's GEMV over [K, N] with so few
 * columns runs 3x slower than the dot products over [N, K] (docs/performance.md), while for wider N
 * the two measured within noise of each other, so the copy is not made.
 *
 * The GELU exporters write for x * 0.5 * (1 + erf(x / sqrt(2))) (BERT's, PyTorch's nn.GELU):
 *   e = Erf(Div(x, sqrt(2)))  or  Erf(Mul(x, 1/sqrt(2)))
 *   f = Add(e, 1)
 *   y = Mul(Mul(x, f), 0.5)   or  Mul(Mul(x, 0.5), f)         (either operand order everywhere)
 * with x read by exactly the two nodes of the pattern.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "kernels/bf16.h"
#include "kernels/sgemm.h"

#define OPT_GEMV_BT_N_MAX 32
#define GELU_NODES 5

struct gemm_match {
	int32_t a, b;            /* A, B values; B constant */
	bool trans_b;
	int64_t k, n;
	float alpha, beta;
	int32_t c;               /* bias value (Gemm's C or the Add's), or RT_VALUE_NONE */
	int32_t add;             /* the Add node, or -1 */
	int32_t act;             /* activation node, or -1 */
	const char *act_kind;
	float act_params[2];
	uint32_t act_nparams;
	int32_t gelu[GELU_NODES];
	uint32_t ngelu;
	int32_t last, out;
};

static bool float_const(const struct opt_ctx *c, int32_t v)
{
	return opt_is_const(c, v) && c->g->values[v].tensor.dtype == BW_DTYPE_FLOAT;
}

/* A constant bias of n values for a product of rank out_rank (-1: unknown). */
static bool is_row_bias(const struct opt_ctx *c, int32_t v, int64_t n, int out_rank)
{
	const struct rt_tensor *t;

	if (!float_const(c, v))
		return false;
	t = &c->g->values[v].tensor;
	if (rt_tensor_elems(t) != n || t->rank < 1 || t->dims[t->rank - 1] != n)
		return false;
	for (int d = 0; d < t->rank - 1; d++) {
		if (t->dims[d] != 1)
			return false;
	}
	return t->rank == 1 || (out_rank >= 0 && t->rank <= out_rank);
}

static bool is_scalar(const struct opt_ctx *c, int32_t v, float want, float rel_tol)
{
	float x;

	return opt_const_scalar(c, v, &x) && fabsf(x - want) <= rel_tol * fabsf(want);
}

/* Node n is a binary op of x and a constant scalar near want; *other is x's operand index. */
static bool binary_with_scalar(const struct opt_ctx *c, int32_t n, const char *op, int32_t x, float want,
			       float rel_tol, bool commutes)
{
	const struct rt_node *node;

	if (!opt_is_op(c, n, op) || c->g->nodes[n].num_inputs != 2)
		return false;
	node = &c->g->nodes[n];
	if (node->inputs[0] == x && is_scalar(c, node->inputs[1], want, rel_tol))
		return true;
	return commutes && node->inputs[1] == x && is_scalar(c, node->inputs[0], want, rel_tol);
}

/* Mul of exactly a and b, in either order. */
static bool mul_of(const struct opt_ctx *c, int32_t n, int32_t a, int32_t b)
{
	const struct rt_node *node;

	if (!opt_is_op(c, n, "Mul") || c->g->nodes[n].num_inputs != 2)
		return false;
	node = &c->g->nodes[n];
	return (node->inputs[0] == a && node->inputs[1] == b) || (node->inputs[0] == b && node->inputs[1] == a);
}

static bool match_gelu(const struct opt_ctx *c, int32_t x, struct gemm_match *m)
{
	const float sqrt2 = 1.41421356237309505f, tol = 1e-6f;
	int32_t r[2], s = -1, other = -1, e, f, m2;

	if (opt_num_readers(c, x) != 2 || c->g->values[x].is_output)
		return false;
	r[0] = opt_reader(c, x, 0);
	r[1] = opt_reader(c, x, 1);
	if (r[0] == r[1])
		return false;
	for (int i = 0; i < 2 && s < 0; i++) {
		if (binary_with_scalar(c, r[i], "Div", x, sqrt2, tol, false) ||
		    binary_with_scalar(c, r[i], "Mul", x, 1.0f / sqrt2, tol, true)) {
			s = r[i];
			other = r[1 - i];
		}
	}
	if (s < 0)
		return false;
	e = opt_sole_reader(c, c->g->nodes[s].outputs[0]);
	if (!opt_is_op(c, e, "Erf"))
		return false;
	f = opt_sole_reader(c, c->g->nodes[e].outputs[0]);
	if (!binary_with_scalar(c, f, "Add", c->g->nodes[e].outputs[0], 1.0f, 0.0f, true))
		return false;
	if (mul_of(c, other, x, c->g->nodes[f].outputs[0])) {
		/* (x * f) * 0.5 */
		m2 = opt_sole_reader(c, c->g->nodes[other].outputs[0]);
		if (!binary_with_scalar(c, m2, "Mul", c->g->nodes[other].outputs[0], 0.5f, 0.0f, true))
			return false;
	} else if (binary_with_scalar(c, other, "Mul", x, 0.5f, 0.0f, true)) {
		/* (x * 0.5) * f */
		m2 = opt_sole_reader(c, c->g->nodes[other].outputs[0]);
		if (m2 != opt_sole_reader(c, c->g->nodes[f].outputs[0]) ||
		    !mul_of(c, m2, c->g->nodes[other].outputs[0], c->g->nodes[f].outputs[0]))
			return false;
	} else {
		return false;
	}
	m->gelu[0] = s;
	m->gelu[1] = e;
	m->gelu[2] = f;
	m->gelu[3] = other;
	m->gelu[4] = m2;
	m->ngelu = GELU_NODES;
	m->act_kind = "Gelu";
	m->act_nparams = 0;
	m->last = m2;
	m->out = c->g->nodes[m2].outputs[0];
	return true;
}

/* The MatMul or Gemm at n, with what it needs to become a FusedGemm. */
static bool match_base(const struct opt_ctx *c, uint32_t n, struct gemm_match *m)
{
	const struct rt_node *node = &c->g->nodes[n];
	const struct rt_tensor *bt;
	bool gemm = opt_is_op(c, (int32_t)n, "Gemm");

	if ((!gemm && !opt_is_op(c, (int32_t)n, "MatMul")) || node->num_inputs < 2 || node->num_outputs != 1)
		return false;
	*m = (struct gemm_match){ .a = node->inputs[0], .b = node->inputs[1], .alpha = 1.0f, .beta = 1.0f,
				  .c = RT_VALUE_NONE, .add = -1, .act = -1, .last = (int32_t)n,
				  .out = node->outputs[0] };
	if (!float_const(c, m->b) || c->g->values[m->b].tensor.rank != 2)
		return false;
	bt = &c->g->values[m->b].tensor;
	if (gemm) {
		if (rt_attr_int(node, "transA", 0) != 0)
			return false;
		m->trans_b = rt_attr_int(node, "transB", 0) != 0;
		m->alpha = rt_attr_float(node, "alpha", 1.0f);
		m->beta = rt_attr_float(node, "beta", 1.0f);
	}
	m->k = bt->dims[m->trans_b ? 1 : 0];
	m->n = bt->dims[m->trans_b ? 0 : 1];
	if (gemm && node->num_inputs > 2 && node->inputs[2] != RT_VALUE_NONE) {
		m->c = node->inputs[2];
		if (!float_const(c, m->c) ||
		    (rt_tensor_elems(&c->g->values[m->c].tensor) != 1 && !is_row_bias(c, m->c, m->n, 2)))
			return false;
	}
	return true;
}

static void match_tail(const struct opt_ctx *c, uint32_t n, struct gemm_match *m)
{
	const struct rt_tensor *out_shape = opt_shape(c, m->out);
	int out_rank = opt_is_op(c, (int32_t)n, "Gemm") ? 2 : out_shape != NULL ? out_shape->rank : -1;
	int32_t r = opt_sole_reader(c, m->out);

	if (m->c == RT_VALUE_NONE && opt_is_op(c, r, "Add") && c->g->nodes[r].num_inputs == 2) {
		const struct rt_node *add = &c->g->nodes[r];
		int32_t bias = add->inputs[0] == m->out ? add->inputs[1] : add->inputs[0];

		if ((add->inputs[0] == m->out) != (add->inputs[1] == m->out) && is_row_bias(c, bias, m->n, out_rank)) {
			m->add = r;
			m->c = bias;
			m->beta = 1.0f;
			m->last = r;
			m->out = add->outputs[0];
			r = opt_sole_reader(c, m->out);
		}
	}
	if (r >= 0 && opt_match_act(c, r, m->out, &m->act_kind, m->act_params, &m->act_nparams)) {
		m->act = r;
		m->last = r;
		m->out = c->g->nodes[r].outputs[0];
		return;
	}
	match_gelu(c, m->out, m);
}

/* The product's rows at OPT_SHAPE_BATCH (A's leading dims), or -1 when the shapes do not tell. */
static int64_t rows_at_shape_batch(const struct opt_ctx *c, const struct gemm_match *m)
{
	const struct rt_tensor *a = opt_shape(c, m->a);
	int64_t rows = 1;

	if (a == NULL || !c->shapes_distinct)
		return -1;
	for (int d = 0; d < a->rank - 1; d++)
		rows *= a->dims[d];
	return rows;
}

/* Whether the product may have one row: A is [batch, K] (or [1, K]), as far as the shapes tell. */
static bool may_be_one_row(const struct opt_ctx *c, const struct gemm_match *m)
{
	int64_t rows = rows_at_shape_batch(c, m);

	return rows >= 0 && rows <= OPT_SHAPE_BATCH;
}

/* [rows, cols] -> [cols, rows] into new storage. */
static float *transposed(const float *src, int64_t rows, int64_t cols)
{
	float *t = opt_alloc_floats(rows * cols);

	for (int64_t i = 0; t != NULL && i < rows; i++) {
		for (int64_t j = 0; j < cols; j++)
			t[j * rows + i] = src[i * cols + j];
	}
	return t;
}

static const char *kind_name(bool gemm, bool bias, const char *act)
{
	static const char *const names[2][2][5] = {
		{ { "MatMul", "MatMul+Relu", "MatMul+LeakyRelu", "MatMul+Clip", "MatMul+Gelu" },
		  { "MatMul+Add", "MatMul+Add+Relu", "MatMul+Add+LeakyRelu", "MatMul+Add+Clip", "MatMul+Add+Gelu" } },
		{ { "Gemm", "Gemm+Relu", "Gemm+LeakyRelu", "Gemm+Clip", "Gemm+Gelu" },
		  { "Gemm", "Gemm+Relu", "Gemm+LeakyRelu", "Gemm+Clip", "Gemm+Gelu" } },
	};
	int a = act == NULL ? 0 : strcmp(act, "Relu") == 0 ? 1 : strcmp(act, "LeakyRelu") == 0 ? 2 :
		strcmp(act, "Clip") == 0 ? 3 : 4;

	return names[gemm][bias][a];
}

/*
 * B for batchwire's GEMM (sgemm.h): packed into 16-column panels, when the CPU has AVX2 and FMA and
 * the shapes say how many rows the product has. Where it may have fewer than RT_SG_ROWS_MIN (a
 * batch of one through an MLP), those runs go to OpenBLAS's GEMV, which reads B as [N, K] (Bt).
 */
/*
 * At precision bf16, B rounded to bf16 into AMX's tiles (bf16.h), whatever the rows: the tiles take
 * a single row as well (padded to 16), at half the fp32 weights' bytes.
 */
static int pack_weights_bf16(struct opt_ctx *c, const char *name, const struct gemm_match *m, const float *b_kn,
			     int32_t *in, uint32_t *packed)
{
	int64_t total = (int64_t)rt_bf16_packed_b_elems(m->k, m->n);
	uint16_t *bp = (uint16_t *)opt_alloc_floats((total + 1) / 2);

	if (bp == NULL)
		return opt_error(c, -ENOMEM, "out of memory");
	rt_bf16_pack_b(b_kn, m->n, 1, m->k, m->n, bp);
	if ((in[1] = opt_add_initializer(c, name, "B_bf16", BW_DTYPE_BFLOAT16, 1, &total, bp)) < 0)
		return in[1];
	(*packed)++;
	return 1;
}

/* Whether pack_weights packs this product's B (see there). */
static bool packs_weights(const struct opt_ctx *c, const struct gemm_match *m)
{
	if (c->precision == RT_PRECISION_BF16)
		return true;
	return rt_sg_available() && rows_at_shape_batch(c, m) >= 0;
}

static int pack_weights(struct opt_ctx *c, const char *name, const struct gemm_match *m, const float *b_kn,
			int32_t *in, uint32_t *packed)
{
	int64_t rows = rows_at_shape_batch(c, m), total = (int64_t)rt_sg_packed_b_floats(m->k, m->n);
	int64_t nk[2] = { m->n, m->k };
	float *bp;

	if (!packs_weights(c, m))
		return 0;
	if (c->precision == RT_PRECISION_BF16)
		return pack_weights_bf16(c, name, m, b_kn, in, packed);
	if ((bp = opt_alloc_floats(total)) == NULL)
		return opt_error(c, -ENOMEM, "out of memory");
	rt_sg_pack_b(b_kn, m->n, m->k, m->n, bp);
	if ((in[1] = opt_add_initializer(c, name, "B_packed", BW_DTYPE_FLOAT, 1, &total, bp)) < 0)
		return in[1];
	(*packed)++;
	if (rows < OPT_SHAPE_BATCH * RT_SG_ROWS_MIN) {
		if (m->trans_b) {
			in[3] = m->b;
		} else {
			float *t = transposed(b_kn, m->k, m->n);

			if (t == NULL || (in[3] = opt_add_initializer(c, name, "B_nk", BW_DTYPE_FLOAT, 2, nk, t)) < 0)
				return opt_error(c, -ENOMEM, "out of memory");
		}
	}
	return 1;
}

static int fuse_one(struct opt_ctx *c, uint32_t n, const struct gemm_match *m, uint32_t *packed)
{
	struct rt_graph *g = c->g;
	bool gemm = opt_is_op(c, (int32_t)n, "Gemm");
	int32_t in[4] = { m->a, m->b, RT_VALUE_NONE, RT_VALUE_NONE };
	const struct rt_tensor bt = g->values[m->b].tensor; /* a copy: values move on adding one */
	const char *name = g->nodes[n].name;
	int64_t kn[2] = { m->k, m->n }, nk[2] = { m->n, m->k };
	float *b_kn = NULL;
	int rc, pk;

	if (m->trans_b && (b_kn = transposed(bt.data, m->n, m->k)) == NULL)
		return opt_error(c, -ENOMEM, "out of memory");
	pk = pack_weights(c, name, m, b_kn != NULL ? b_kn : bt.data, in, packed);
	if (pk < 0) {
		free(b_kn);
		return pk;
	}
	if (pk == 0 && m->trans_b) {
		if ((in[1] = opt_add_initializer(c, name, "B_kn", BW_DTYPE_FLOAT, 2, kn, b_kn)) < 0)
			return opt_error(c, -ENOMEM, "out of memory");
		b_kn = NULL;
		(*packed)++;
	}
	free(b_kn);
	if (m->c != RT_VALUE_NONE) {
		const struct rt_tensor ct = g->values[m->c].tensor;
		float *bias = opt_alloc_floats(m->n);

		if (bias == NULL)
			return opt_error(c, -ENOMEM, "out of memory");
		for (int64_t j = 0; j < m->n; j++)
			bias[j] = m->beta * ((const float *)ct.data)[rt_tensor_elems(&ct) == 1 ? 0 : j];
		if ((in[2] = opt_add_initializer(c, name, "bias", BW_DTYPE_FLOAT, 1, &m->n, bias)) < 0)
			return in[2];
	}
	if (pk == 0 && m->n < OPT_GEMV_BT_N_MAX && may_be_one_row(c, m)) {
		if (m->trans_b) {
			in[3] = m->b;
		} else {
			float *t = transposed(bt.data, m->k, m->n);

			if (t == NULL || (in[3] = opt_add_initializer(c, name, "B_nk", BW_DTYPE_FLOAT, 2, nk, t)) < 0)
				return opt_error(c, -ENOMEM, "out of memory");
		}
		(*packed)++;
	}
	if (m->add >= 0 || m->act_kind != NULL)
		opt_report(c, kind_name(gemm, m->add >= 0 || m->c != RT_VALUE_NONE, m->act_kind), 1);
	if (m->add >= 0 && m->add != m->last)
		opt_kill(c, (uint32_t)m->add);
	for (uint32_t i = 0; i < m->ngelu; i++) {
		if (m->gelu[i] != m->last)
			opt_kill(c, (uint32_t)m->gelu[i]);
	}
	if ((rc = opt_make_fused(c, (uint32_t)m->last, n, "FusedGemm", in, 4, m->out)) < 0)
		return rc;
	/* Gemm's own attributes are applied: only alpha stays */
	opt_attr_remove(&g->nodes[m->last], "transA");
	opt_attr_remove(&g->nodes[m->last], "transB");
	opt_attr_remove(&g->nodes[m->last], "beta");
	if (m->act_kind != NULL && opt_set_act(&g->nodes[m->last], m->act_kind, m->act_params, m->act_nparams) != 0)
		return opt_error(c, -ENOMEM, "out of memory");
	if (pk > 0 && (opt_attr_ints(&g->nodes[m->last], "weight_shape", kn, 2) != 0 ||
		       opt_attr_int(&g->nodes[m->last], "packed_weights",
				    c->precision == RT_PRECISION_BF16 ? RT_K_PACKED_BF16 : RT_K_PACKED_FP32) != 0))
		return opt_error(c, -ENOMEM, "out of memory");
	return 0;
}

int opt_fuse_gemm(struct opt_ctx *c)
{
	uint32_t packed = 0;
	int rc = opt_index(c);

	for (uint32_t n = 0; rc == 0 && n < c->g->num_nodes; n++) {
		struct gemm_match m;

		if (!match_base(c, n, &m))
			continue;
		match_tail(c, n, &m);
		if (m.add < 0 && m.act_kind == NULL && !m.trans_b && !(m.n < OPT_GEMV_BT_N_MAX && may_be_one_row(c, &m)) &&
		    !packs_weights(c, &m) && opt_is_op(c, (int32_t)n, "MatMul"))
			continue; /* nothing to fuse or pack: the MatMul kernel makes the same call */
		rc = fuse_one(c, n, &m, &packed);
	}
	opt_report(c, "weights pre-packed", packed);
	if (c->precision == RT_PRECISION_BF16)
		opt_report(c, RT_OPT_KIND_BF16, packed);
	return rc;
}

/* A FusedGemm whose B went into AMX's tiles (precision bf16). */
static bool bf16_gemm(const struct opt_ctx *c, int32_t n)
{
	return opt_is_ours(c, n, "FusedGemm") && rt_attr_int(&c->g->nodes[n], "packed_weights", 0) == RT_K_PACKED_BF16;
}

/*
 * A FusedGemm on AMX tiles whose output only such FusedGemms read, as their A, keeps it in bf16
 * ("output_bf16"): the readers' tiles load it in place, where they would round an fp32 copy of
 * twice the bytes (the transformer's FFN: 1536 values a token between its two GEMMs). The readers'
 * depth must be a whole number of tiles.
 */
int opt_bf16_handoff(struct opt_ctx *c)
{
	struct rt_graph *g = c->g;
	uint32_t kept = 0;
	int rc;

	if (c->precision != RT_PRECISION_BF16 || (rc = opt_index(c)) < 0)
		return 0;
	for (uint32_t n = 0; n < g->num_nodes; n++) {
		int32_t v = g->nodes[n].outputs[0];
		uint32_t readers;
		bool all = true;

		if (!bf16_gemm(c, (int32_t)n) || g->values[v].is_output || (readers = opt_num_readers(c, v)) == 0)
			continue;
		for (uint32_t k = 0; k < readers && all; k++) {
			int32_t r = opt_reader(c, v, k);
			const struct rt_attr *ws = r >= 0 ? rt_node_attr(&g->nodes[r], "weight_shape") : NULL;

			all = bf16_gemm(c, r) && g->nodes[r].inputs[0] == v && ws != NULL && ws->type == RT_ATTR_INTS &&
			      ws->count == 2 && ws->ints[0] % 32 == 0;
			for (uint16_t j = 1; all && j < g->nodes[r].num_inputs; j++)
				all = g->nodes[r].inputs[j] != v;
		}
		if (!all)
			continue;
		if (opt_attr_int(&g->nodes[n], "output_bf16", 1) != 0)
			return opt_error(c, -ENOMEM, "out of memory");
		kept++;
	}
	opt_report(c, "FusedGemm output kept in bf16 for the next", kept);
	return 0;
}
