/* SPDX-License-Identifier: BSD-3-Clause */
/* bwrun's report: the model, where every op runs and what the optimiser did, and the outputs. */
#include "bwrun.h"

const char *dims_str(const struct rt_tensor *t, char *buf, size_t cap)
{
	size_t n = 0;

	n += (size_t)snprintf(buf + n, cap - n, "[");
	for (unsigned int d = 0; d < t->rank && n < cap; d++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, d ? "," : "", t->dims[d]);
	if (n < cap)
		snprintf(buf + n, cap - n, "]");
	return buf;
}

const char *bytes_str(size_t b, char *buf, size_t cap)
{
	if (b >= (size_t)1 << 20)
		snprintf(buf, cap, "%.1f MiB", (double)b / (1 << 20));
	else if (b >= (size_t)10 << 10)
		snprintf(buf, cap, "%.1f KiB", (double)b / (1 << 10));
	else
		snprintf(buf, cap, "%zu B", b);
	return buf;
}

struct op_count {
	const char *op, *domain;
	const char *device;
	unsigned int nodes, steps;
};

static const char *device_name(enum rt_device d)
{
	return d == RT_DEVICE_CPU ? "cpu" : d == RT_DEVICE_GPU ? "gpu" : "?";
}

void print_model(const struct rt_graph *g, const char *path)
{
	printf("model  %s (IR %" PRId64 ", opsets", path, g->ir_version);
	for (uint16_t i = 0; i < g->num_opsets; i++)
		printf("%s %s %" PRId64, i ? "," : "", g->opsets[i].domain[0] ? g->opsets[i].domain : "ai.onnx",
		       g->opsets[i].version);
	printf(")\n");
}

void print_placement(const struct runner *r, const struct opts *o, const struct rt_opt_report *rep)
{
	const struct rt_graph *g = r->g;
	struct op_count ops[OP_TYPES_MAX];
	unsigned int num_ops = 0, steps = rt_plan_num_steps(r->plan);
	/* per node, the kernel the planner resolved for its step; NULL: folded, run on the host at plan time */
	const struct rt_kernel **ran = calloc(g->num_nodes + 1, sizeof(*ran));
	struct rt_plan_stats st;
	char a[32], b[32], c[32], d[32], e[32], f[32];

	if (ran == NULL)
		die("out of memory");
	for (uint32_t s = 0; s < steps; s++) {
		struct rt_plan_step_info si;

		if (rt_plan_step_info(r->plan, s, &si) == 0 && si.node < g->num_nodes)
			ran[si.node] = si.kernel;
	}
	for (uint32_t n = 0; n < g->num_nodes; n++) {
		const struct rt_node *node = &g->nodes[n];
		unsigned int i;

		for (i = 0; i < num_ops; i++)
			if (strcmp(ops[i].op, node->op_type) == 0 && strcmp(ops[i].domain, node->domain) == 0)
				break;
		if (i == num_ops) {
			if (num_ops == OP_TYPES_MAX)
				continue;
			/* folded nodes ran on the host (CPU kernels), whatever the device */
			ops[num_ops++] = (struct op_count){ node->op_type, node->domain,
							    ran[n] != NULL ? device_name(ran[n]->device) : "cpu", 0, 0 };
		}
		ops[i].nodes++;
		ops[i].steps += ran[n] != NULL;
	}
	free(ran);

	printf("graph  %u nodes loaded, %u after optimisation%s\n", rep->nodes_before, rep->nodes_after,
	       o->optimize ? "" : " (--no-optimize)");
	if (o->optimize) {
		if (rep->num_kinds == 0)
			printf("optimise  nothing rewritten\n");
		for (uint32_t i = 0; i < rep->num_kinds && i < RT_OPT_KINDS_MAX; i++)
			printf("optimise  %-40s x%u\n", rep->kinds[i].what, rep->kinds[i].count);
	}
	printf("ops    %-34s %6s %6s %6s  %s\n", "op", "nodes", "run", "folded", "kernel");
	for (unsigned int i = 0; i < num_ops; i++) {
		char name[128];

		snprintf(name, sizeof(name), "%s%s%s", ops[i].domain, ops[i].domain[0] ? "." : "", ops[i].op);
		printf("       %-34s %6u %6u %6u  %s\n", name, ops[i].nodes, ops[i].steps, ops[i].nodes - ops[i].steps,
		       ops[i].device);
	}
	rt_plan_stats(r->plan, &st);
	if (!o->gpu) {
		printf("chunks %s\n", r->chunk_report);
		if (r->chunk_rows < o->batch)
			printf("       batch %" PRId64 " runs depth first: %" PRId64 " chunks of %" PRId64 " rows, through "
			       "the plan below\n", o->batch, o->batch / r->chunk_rows, r->chunk_rows);
	}
	printf("plan   batch %" PRId64 ", %s: %u steps, %u nodes folded, %u outputs over an input\n", r->chunk_rows,
	       o->gpu ? "device program, one graph launch per batch" :
	       o->workers == 1 ? "sequential layout, rt_plan_run on this thread"
			       : "concurrent layout, multi-worker executor",
	       st.steps, st.folded, st.in_place);
	if (o->gpu)
		return; /* the device's arena and constants are reported by setup_gpu */

	printf("arena  %s (tensors %s, %s without reuse; descriptors %s); constants %s; worker scratch %s%s\n",
	       bytes_str(st.arena_bytes, a, sizeof(a)), bytes_str(st.tensor_bytes, b, sizeof(b)),
	       bytes_str(st.tensor_bytes_sum, c, sizeof(c)), bytes_str(st.descriptor_bytes, d, sizeof(d)),
	       bytes_str(st.constant_bytes, e, sizeof(e)), bytes_str(st.worker_scratch_bytes, f, sizeof(f)),
	       o->workers == 1 ? " (in the arena)" : " per worker");
}

void print_outputs(const struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;
	char a[128];

	for (uint32_t i = 0; i < g->num_outputs; i++) {
		const char *name = g->values[g->outputs[i]].name;
		const struct rt_tensor *t = &r->out[i];
		const void *data = r->out_data[i] != NULL ? r->out_data[i] : t->data;
		size_t elem = rt_dtype_size(t->dtype), n = elem != 0 ? r->out_bytes[i] / elem : 0;
		double lo = INFINITY, hi = -INFINITY, sum = 0;
		size_t nonfinite = 0;

		for (size_t e = 0; e < n; e++) {
			double v = bw_elem_get(t->dtype, data, e);

			if (!isfinite(v)) {
				nonfinite++;
				continue;
			}
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
			sum += v;
		}
		printf("output %-20s %-7s %-18s", name, rt_dtype_name(t->dtype), dims_str(t, a, sizeof(a)));
		if (n > nonfinite)
			printf(" min %.6g max %.6g mean %.6g", lo, hi, sum / (double)(n - nonfinite));
		if (nonfinite > 0)
			printf(" NON-FINITE %zu of %zu", nonfinite, n);
		printf("\n       first:");
		for (size_t e = 0; e < n && e < VALUES_SHOWN; e++)
			printf(" %.6g", bw_elem_get(t->dtype, data, e));
		printf("%s\n", n > VALUES_SHOWN ? " ..." : "");
		if (o->output_dir != NULL)
			write_npy(o->output_dir, name, t, data);
	}
}
