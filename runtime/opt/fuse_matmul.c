/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A MatMul of two computed operands (attention's Q.K^T and P.V, what fuse_gemm.c leaves) with the
 * Reshape/Transpose that feed it, a scale after it and the Transpose/Reshape after that -> one
 * FusedMatMul (runtime/kernels/fused.h), which reads and writes through strides what those nodes
 * copied:
 *
 *   q [B,S,H*D] -Reshape-> [B,S,H,D] -Transpose(0,2,1,3)-> [B,H,S,D]  \
 *   k [B,S,H*D] -Reshape-> [B,S,H,D] -Transpose(0,2,3,1)-> [B,H,D,S]  -> MatMul -> Div(sqrt D)
 *   P [B,H,S,S], v [B,S,H*D] -Reshape, Transpose-> [B,H,S,D]          -> MatMul
 *                                      -> Transpose(0,2,1,3) -> Reshape [B,S,H*D]
 *
 * Each folded node must have the pattern as its only reader; the scale is a Div or Mul by a
 * constant scalar right after the MatMul (alpha = 1/c or c); an Add after it of a row broadcast
 * over the product's rows (attention's mask bias, [B, 1, 1, S] onto the scores [B, H, S, S])
 * becomes input C, added in the GEMM's epilogue instead of a pass over the scores. Whether the strides work (each matrix
 * row- or column-contiguous, the product's rows contiguous in the output) is asked of the kernel's
 * infer on the inferred shapes; if it refuses, nothing changes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "kernels/fused.h"

#define FMM_FOLD_MAX 8 /* 2 per operand, scale, Add, Transpose, Reshape */

/* An INTS attribute's values, copied: the nodes they come from are freed by the rewrite. */
struct fmm_ints {
	uint32_t count; /* 0: absent */
	int64_t v[RT_MAX_RANK];
};

struct fmm_match {
	int32_t src[2];              /* the operands' sources */
	int32_t bias;                /* input C, or RT_VALUE_NONE */
	struct fmm_ints shape[2], perm[2], y_perm, y_shape;
	float alpha;
	int32_t folded[FMM_FOLD_MAX];
	uint32_t nfolded;
	int32_t last, out;
};

/* A Reshape's constant shape (int64, 1 to 4 dims) with allowzero 0, into out. */
static bool reshape_shape(const struct opt_ctx *c, int32_t n, struct fmm_ints *out)
{
	const struct rt_node *node = &c->g->nodes[n];
	const struct rt_tensor *t;

	if (node->num_inputs != 2 || !opt_is_const(c, node->inputs[1]) || rt_attr_int(node, "allowzero", 0) != 0)
		return false;
	t = &c->g->values[node->inputs[1]].tensor;
	if (t->dtype != BW_DTYPE_INT64 || t->rank != 1 || t->dims[0] < 1 || t->dims[0] > 4)
		return false;
	out->count = (uint32_t)t->dims[0];
	memcpy(out->v, t->data, out->count * sizeof(int64_t));
	return true;
}

/* A Transpose's perm (1 to 4 dims), into out. */
static bool transpose_perm(const struct opt_ctx *c, int32_t n, struct fmm_ints *out)
{
	const struct rt_attr *a = rt_node_attr(&c->g->nodes[n], "perm");

	if (a == NULL || a->type != RT_ATTR_INTS || a->count < 1 || a->count > 4)
		return false;
	out->count = a->count;
	memcpy(out->v, a->ints, a->count * sizeof(int64_t));
	return true;
}

/* Walks up from operand i of MatMul n through a Transpose and a Reshape that only it reads. */
static void match_operand(const struct opt_ctx *c, int32_t n, int i, struct fmm_match *m)
{
	int32_t v = c->g->nodes[n].inputs[i], p, reader = n;

	m->src[i] = v;
	if (v < 0) /* absent (named ""): the planner refuses the node */
		return;
	p = c->g->values[v].producer;
	if (opt_is_op(c, p, "Transpose") && c->g->nodes[p].num_inputs >= 1 && opt_sole_reader(c, v) == reader &&
	    transpose_perm(c, p, &m->perm[i])) {
		m->folded[m->nfolded++] = p;
		reader = p;
		v = c->g->nodes[p].inputs[0];
		m->src[i] = v;
		if (v < 0)
			return;
		p = c->g->values[v].producer;
	}
	if (opt_is_op(c, p, "Reshape") && opt_sole_reader(c, v) == reader && reshape_shape(c, p, &m->shape[i])) {
		m->folded[m->nfolded++] = p;
		m->src[i] = c->g->nodes[p].inputs[0];
	}
}

/* Whether v (shape known) adds one row to every row of the product p: [batch'..., 1, N], each batch'
 * dim p's or 1. */
static bool row_bias_of(const struct opt_ctx *c, int32_t v, int32_t p)
{
	const struct rt_tensor *t = opt_shape(c, v), *y = opt_shape(c, p);

	if (t == NULL || y == NULL || t->dtype != BW_DTYPE_FLOAT || t->rank != y->rank || t->rank < 2 ||
	    t->dims[t->rank - 2] != 1 || t->dims[t->rank - 1] != y->dims[y->rank - 1])
		return false;
	for (int d = 0; d < t->rank - 2; d++) {
		if (t->dims[d] != 1 && t->dims[d] != y->dims[d])
			return false;
	}
	return true;
}

static void match_output(const struct opt_ctx *c, struct fmm_match *m)
{
	int32_t r = opt_sole_reader(c, m->out);
	float k;

	if (r >= 0 && c->g->nodes[r].num_inputs == 2 && c->g->nodes[r].inputs[0] == m->out &&
	    opt_const_scalar(c, c->g->nodes[r].inputs[1], &k) && k != 0.0f &&
	    (opt_is_op(c, r, "Div") || opt_is_op(c, r, "Mul"))) {
		m->alpha = opt_is_op(c, r, "Div") ? 1.0f / k : k;
		m->folded[m->nfolded++] = m->last = r;
		m->out = c->g->nodes[r].outputs[0];
		r = opt_sole_reader(c, m->out);
	}
	if (opt_is_op(c, r, "Add") && c->g->nodes[r].num_inputs == 2) {
		const struct rt_node *add = &c->g->nodes[r];
		int32_t other = add->inputs[0] == m->out ? add->inputs[1] : add->inputs[0];

		if (other != m->out && row_bias_of(c, other, m->out)) {
			m->bias = other;
			m->folded[m->nfolded++] = m->last = r;
			m->out = add->outputs[0];
			r = opt_sole_reader(c, m->out);
		}
	}
	if (opt_is_op(c, r, "Transpose") && transpose_perm(c, r, &m->y_perm)) {
		m->folded[m->nfolded++] = m->last = r;
		m->out = c->g->nodes[r].outputs[0];
		r = opt_sole_reader(c, m->out);
		if (opt_is_op(c, r, "Reshape") && reshape_shape(c, r, &m->y_shape)) {
			m->folded[m->nfolded++] = m->last = r;
			m->out = c->g->nodes[r].outputs[0];
		}
	}
}

static int set_ints(struct rt_node *n, const char *name, const struct fmm_ints *v)
{
	return v->count > 0 ? opt_attr_ints(n, name, v->v, v->count) : 0;
}

/* The candidate node's attributes, on node n (the fused node, or a scratch copy to try). */
static int set_attrs(struct rt_node *n, const struct fmm_match *m)
{
	if (set_ints(n, "a_shape", &m->shape[0]) != 0 || set_ints(n, "a_perm", &m->perm[0]) != 0 ||
	    set_ints(n, "b_shape", &m->shape[1]) != 0 || set_ints(n, "b_perm", &m->perm[1]) != 0 ||
	    set_ints(n, "y_perm", &m->y_perm) != 0 || set_ints(n, "y_shape", &m->y_shape) != 0)
		return -ENOMEM;
	if (m->alpha != 1.0f && opt_attr_float(n, "alpha", m->alpha) != 0)
		return -ENOMEM;
	return 0;
}

/* Whether the kernel takes the candidate with the inferred shapes, giving the pattern's output shape. */
static bool kernel_takes(struct opt_ctx *c, const struct fmm_match *m)
{
	struct rt_node probe = { .name = (char *)"probe", .op_type = (char *)"FusedMatMul",
				 .domain = (char *)RT_K_DOMAIN, .opset = RT_K_DOMAIN_OPSET,
				 .num_inputs = m->bias != RT_VALUE_NONE ? 3 : 2 };
	const struct rt_tensor *sa = opt_shape(c, m->src[0]), *sb = opt_shape(c, m->src[1]), *so = opt_shape(c, m->out);
	const struct rt_tensor *sc = m->bias != RT_VALUE_NONE ? opt_shape(c, m->bias) : NULL;
	struct rt_tensor in[3], out[1];
	const struct rt_kernel *k;
	char why[RT_ERR_MAX];
	bool ok = false;

	if (sa == NULL || sb == NULL || so == NULL || sa->dtype != BW_DTYPE_FLOAT || sb->dtype != BW_DTYPE_FLOAT)
		return false;
	k = rt_kernel_find("FusedMatMul", RT_K_DOMAIN, RT_K_DOMAIN_OPSET, BW_DTYPE_FLOAT, c->dev, why, sizeof(why));
	if (k == NULL || set_attrs(&probe, m) != 0)
		goto out;
	in[0] = *sa;
	in[1] = *sb;
	if (sc != NULL)
		in[2] = *sc;
	memset(out, 0, sizeof(out));
	ok = k->infer(&probe, in, out, why, sizeof(why)) == 0 && out[0].rank == so->rank &&
	     memcmp(out[0].dims, so->dims, so->rank * sizeof(int64_t)) == 0;
out:
	for (uint16_t i = 0; i < probe.num_attrs; i++) {
		free(probe.attrs[i].name);
		free(probe.attrs[i].ints);
		free(probe.attrs[i].floats);
	}
	free(probe.attrs);
	return ok;
}

int opt_fuse_matmul(struct opt_ctx *c)
{
	struct rt_graph *g = c->g;
	uint32_t fused = 0;
	int rc = opt_index(c);

	for (uint32_t n = 0; rc == 0 && n < g->num_nodes; n++) {
		struct fmm_match m = { .alpha = 1.0f, .last = (int32_t)n, .bias = RT_VALUE_NONE };
		int32_t in[3];

		if (!opt_is_op(c, (int32_t)n, "MatMul") || g->nodes[n].num_inputs != 2 || g->nodes[n].num_outputs != 1)
			continue;
		m.out = g->nodes[n].outputs[0];
		match_operand(c, (int32_t)n, 0, &m);
		match_operand(c, (int32_t)n, 1, &m);
		match_output(c, &m);
		if (m.nfolded == 0 || !kernel_takes(c, &m))
			continue;
		for (uint32_t i = 0; i < m.nfolded; i++) {
			if (m.folded[i] != m.last)
				opt_kill(c, (uint32_t)m.folded[i]);
		}
		in[0] = m.src[0];
		in[1] = m.src[1];
		in[2] = m.bias;
		if ((rc = opt_make_fused(c, (uint32_t)m.last, n, "FusedMatMul", in, m.bias != RT_VALUE_NONE ? 3 : 2,
					 m.out)) < 0)
			break;
		if (set_attrs(&g->nodes[m.last], &m) != 0 ||
		    (c->precision == RT_PRECISION_BF16 && opt_attr_int(&g->nodes[m.last], "bf16", 1) != 0))
			rc = opt_error(c, -ENOMEM, "out of memory");
		fused++;
	}
	opt_report(c, "MatMul with Transpose/Reshape/scale folded", fused);
	if (c->precision == RT_PRECISION_BF16)
		opt_report(c, RT_OPT_KIND_BF16, fused);
	return rc;
}

/* ---- attention: scores, softmax, context -> FusedAttention ----------------------------------------- */

/* The attributes a FusedMatMul has, src's copied onto dst each under prefix + its name (src == dst:
 * renamed). The values are copied out first: adding an attribute moves dst's array. */
static int copy_prefixed(struct rt_node *dst, const struct rt_node *src, const char *prefix)
{
	static const char *const names[] = { "a_shape", "a_perm", "b_shape", "b_perm", "y_perm", "y_shape", "alpha" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct rt_attr *a = rt_node_attr(src, names[i]);
		int64_t ints[RT_MAX_RANK];
		uint32_t count;
		bool is_float;
		float f;
		char name[32];
		int rc;

		if (a == NULL || (a->type != RT_ATTR_INTS && a->type != RT_ATTR_FLOAT) ||
		    (a->type == RT_ATTR_INTS && a->count > RT_MAX_RANK))
			continue; /* fmm_view_of refuses anything else the same way either name */
		is_float = a->type == RT_ATTR_FLOAT;
		f = a->f;
		count = is_float ? 0 : a->count;
		if (count > 0)
			memcpy(ints, a->ints, count * sizeof(int64_t));
		snprintf(name, sizeof(name), "%s%s", prefix, names[i]);
		rc = is_float ? opt_attr_float(dst, name, f) : opt_attr_ints(dst, name, ints, count);
		if (rc != 0)
			return rc;
		if (src == dst)
			opt_attr_remove(dst, names[i]);
	}
	return 0;
}

/*
 * FusedMatMul (the scores, their product as it is) -> Softmax (fastpath.c's, the last axis) ->
 * FusedMatMul (the context, reading the softmax as its A as it is, no C) -> one FusedAttention,
 * which keeps each head's scores in scratch (fused.h). Each of the first two read only by the
 * next. Each FusedMatMul was taken by its kernel's infer; with the scores as the context's A
 * unchanged, FusedAttention's two products are those two, batch dims and all.
 */
int opt_fuse_attention(struct opt_ctx *c)
{
	struct rt_graph *g = c->g;
	uint32_t fused = 0;
	int rc = opt_index(c);

	for (uint32_t n = 0; rc == 0 && n < g->num_nodes; n++) {
		const struct rt_node *s = &g->nodes[n], *sm;
		struct rt_node *ctx;
		int32_t smn, cn, in[4];

		if (!opt_is_ours(c, (int32_t)n, "FusedMatMul") || rt_node_attr(s, "y_perm") != NULL || rt_node_attr(s, "y_shape") != NULL)
			continue;
		smn = opt_sole_reader(c, s->outputs[0]);
		if (!opt_is_ours(c, smn, "Softmax") || g->nodes[smn].num_outputs != 1)
			continue;
		sm = &g->nodes[smn];
		cn = opt_sole_reader(c, sm->outputs[0]);
		if (!opt_is_ours(c, cn, "FusedMatMul"))
			continue;
		ctx = &g->nodes[cn];
		if (ctx->inputs[0] != sm->outputs[0] || ctx->num_inputs > 2 || rt_node_attr(ctx, "a_shape") != NULL ||
		    rt_node_attr(ctx, "a_perm") != NULL || rt_attr_int(ctx, "bf16", 0) != rt_attr_int(s, "bf16", 0))
			continue;
		in[0] = s->inputs[0];
		in[1] = s->inputs[1];
		in[2] = s->num_inputs > 2 ? s->inputs[2] : RT_VALUE_NONE;
		in[3] = ctx->inputs[1];
		if (copy_prefixed(ctx, ctx, "c_") != 0 || copy_prefixed(ctx, s, "s_") != 0) {
			rc = opt_error(c, -ENOMEM, "out of memory");
			break;
		}
		opt_kill(c, n);
		opt_kill(c, (uint32_t)smn);
		if ((rc = opt_make_fused(c, (uint32_t)cn, (uint32_t)cn, "FusedAttention", in, 4, ctx->outputs[0])) < 0)
			break;
		fused++;
	}
	opt_report(c, "attention (scores, softmax, context) fused", fused);
	return rc;
}
