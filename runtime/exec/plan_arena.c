/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The arena layout of a plan (plan_arena.h).
 *
 * Two layouts (enum rt_plan_layout). Sequential, for rt_plan_run: lifetimes are node indices, a
 * tensor born at its producer (-1 for graph inputs) and dead after its last reader (num_nodes for
 * graph outputs), a node's scratch live at that node only. Concurrent, for rt_executor, where steps
 * run in any order the step graph allows: tensor B may share bytes with tensor A only when one of
 * them is produced by a transitive successor of the other's producer and of all of the other's
 * readers, which reachability bitsets over the steps answer; scratch then belongs to the workers,
 * not to the arena. Either way the layout is the greedy-by-size heuristic of TFLite's arena planner:
 * largest first, each at the lowest offset that clears every placed tensor it may be alive with.
 * Before it, an output a kernel may write over one of its inputs (rt_kernel.in_place) joins that
 * input's item where the input dies at that step. It runs at load time, so it allocates freely.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan_arena.h"

/* One thing the arena holds: a tensor or (sequential layout) a node's scratch. */
struct arena_item {
	size_t size;
	int32_t birth, death;  /* sequential: node indices, both included */
	int32_t producer;      /* concurrent: its producing step, -1 for a graph input */
	uint64_t *after;       /* concurrent: steps that may write over it (bitset) */
	size_t offset;
	uint32_t id;  /* tie-break, for a layout that does not depend on qsort */
	int32_t host; /* the item whose bytes it takes (merge_in_place), or -1 */
};

static bool bit_test(const uint64_t *set, uint32_t i)
{
	return (set[i / 64] >> (i % 64)) & 1;
}

/* Whether a and b may be alive at the same time, so must not share a byte. */
static bool items_conflict(const struct arena_item *a, const struct arena_item *b, enum rt_plan_layout layout)
{
	if (layout == RT_PLAN_LAYOUT_SEQUENTIAL)
		return a->birth <= b->death && b->birth <= a->death;
	/* b after a (b's producer waits for a's producer and readers), or the other way round */
	return !(b->producer >= 0 && bit_test(a->after, (uint32_t)b->producer)) &&
	       !(a->producer >= 0 && bit_test(b->after, (uint32_t)a->producer));
}

static int item_cmp_size(const void *a, const void *b)
{
	const struct arena_item *x = *(struct arena_item *const *)a, *y = *(struct arena_item *const *)b;

	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	if (x->birth != y->birth)
		return x->birth < y->birth ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int item_cmp_offset(const void *a, const void *b)
{
	const struct arena_item *x = *(struct arena_item *const *)a, *y = *(struct arena_item *const *)b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Greedy by size: each item at the lowest offset clear of the placed items alive with it. */
static size_t layout_items(struct arena_item *items, uint32_t count, struct arena_item **order,
			   struct arena_item **alive, enum rt_plan_layout layout)
{
	size_t top = 0;

	for (uint32_t i = 0; i < count; i++)
		order[i] = &items[i];
	qsort(order, count, sizeof(order[0]), item_cmp_size);
	for (uint32_t i = 0; i < count; i++) {
		struct arena_item *it = order[i];
		uint32_t nb_alive = 0;
		size_t offset = 0;

		if (it->host >= 0)
			continue; /* its host's bytes */
		for (uint32_t j = 0; j < i; j++) {
			if (order[j]->size > 0 && order[j]->host < 0 && items_conflict(order[j], it, layout))
				alive[nb_alive++] = order[j];
		}
		qsort(alive, nb_alive, sizeof(alive[0]), item_cmp_offset);
		for (uint32_t j = 0; j < nb_alive && it->size > 0; j++) {
			if (offset + it->size <= alive[j]->offset)
				break;
			if (alive[j]->offset + alive[j]->size > offset)
				offset = alive[j]->offset + alive[j]->size;
		}
		it->offset = offset;
		if (offset + it->size > top)
			top = offset + it->size;
	}
	return top;
}

/*
 * reach[s * words ...]: the steps that run after step s in every order, its transitive consumers.
 * Consumers come later in the step order, so one backward pass does.
 */
static uint64_t *steps_reach(const struct rt_plan *p, uint32_t words)
{
	uint64_t *reach = calloc((size_t)p->num_steps * words + 1, sizeof(uint64_t));

	for (uint32_t s = p->num_steps; reach != NULL && s-- > 0;) {
		const struct rt_plan_step *st = &p->steps[s];
		uint64_t *r = reach + (size_t)s * words;

		for (uint32_t k = 0; k < st->num_consumers; k++) {
			uint32_t c = st->consumers[k];
			const uint64_t *rc = reach + (size_t)c * words;

			r[c / 64] |= UINT64_C(1) << (c % 64);
			for (uint32_t w = 0; w < words; w++)
				r[w] |= rc[w];
		}
	}
	return reach;
}

/*
 * The concurrent layout's "after" sets: for each arena tensor, the steps that run after its producer
 * and after every step reading it, so that whatever they produce may take its bytes. A graph input
 * has no producer (the executor writes it before any step runs); a graph output is never dead.
 */
static int concurrent_after(const struct rt_plan *p, const int32_t *step_of, const uint64_t *reach, uint32_t words,
			    const int32_t *item_of, struct arena_item *items, uint32_t count, uint64_t **after_out)
{
	const struct rt_graph *g = p->graph;
	uint64_t *after = calloc((size_t)count * words + 1, sizeof(uint64_t));

	if (after == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		const struct rt_plan_value *pv = &p->values[items[i].id];
		uint64_t *a = after + (size_t)i * words;

		items[i].producer = pv->birth >= 0 ? step_of[pv->birth] : -1;
		items[i].after = a;
		if (pv->death == (int32_t)g->num_nodes)
			continue; /* a graph output: alive to the end */
		if (items[i].producer >= 0)
			memcpy(a, reach + (size_t)items[i].producer * words, words * sizeof(uint64_t));
		else
			memset(a, 0xff, words * sizeof(uint64_t));
	}
	for (uint32_t s = 0; s < p->num_steps; s++) {
		const struct rt_plan_step *st = &p->steps[s];
		const uint64_t *r = reach + (size_t)s * words;

		for (uint16_t j = 0; j < st->num_inputs; j++) {
			int32_t v = st->node->inputs[j];
			uint64_t *a;

			if (v == RT_VALUE_NONE || item_of[v] < 0)
				continue;
			a = after + (size_t)item_of[v] * words;
			for (uint32_t w = 0; w < words; w++)
				a[w] &= r[w];
		}
	}
	*after_out = after;
	return 0;
}

/*
 * Whether step s is where value v dies: s reads it once, and no step reads it after s. In the
 * sequential layout s is its last reader; in the concurrent one every other step reading it runs
 * before s in every order (s is in their reach).
 */
static bool dies_at(const struct rt_plan *p, uint32_t s, int32_t v, const uint64_t *reach, uint32_t words)
{
	const struct rt_plan_step *st = &p->steps[s];
	unsigned int reads = 0;

	for (uint16_t j = 0; j < st->num_inputs; j++)
		reads += st->node->inputs[j] == v;
	if (reads != 1)
		return false;
	if (reach == NULL)
		return p->values[v].death == (int32_t)st->node_index;
	for (uint32_t r = 0; r < p->num_steps; r++) {
		const struct rt_plan_step *rt = &p->steps[r];

		for (uint16_t j = 0; r != s && j < rt->num_inputs; j++) {
			if (rt->node->inputs[j] == v && !bit_test(reach + (size_t)r * words, s))
				return false;
		}
	}
	return true;
}

/* Whether a and b are tensors of one dtype and shape. */
static bool same_tensor(const struct rt_tensor *a, const struct rt_tensor *b)
{
	return a->dtype == b->dtype && a->rank == b->rank && memcmp(a->dims, b->dims, a->rank * sizeof(a->dims[0])) == 0;
}

/*
 * Outputs written over an input (rt_kernel.in_place): the output's item joins the input's host,
 * which then lives as long as the output. Only an input of the output's dtype and shape, some step
 * produced (a graph input's bytes are written before the run and may be read back), that is no
 * graph output and dies at this step; a chain (a residual block's output taken by the next
 * block's) ends in one item.
 */
static void merge_in_place(struct rt_plan *p, struct arena_item *items, const int32_t *item_of, const uint64_t *reach,
			   uint32_t words)
{
	const struct rt_graph *g = p->graph;

	for (uint32_t s = 0; s < p->num_steps; s++) {
		struct rt_plan_step *st = &p->steps[s];
		int32_t z = st->in_place_wanted >= 0 ? st->node->inputs[st->in_place_wanted] : RT_VALUE_NONE;
		int32_t y = st->num_outputs > 0 ? st->node->outputs[0] : RT_VALUE_NONE;
		int32_t host;

		if (z == RT_VALUE_NONE || y == RT_VALUE_NONE || item_of[z] < 0 || item_of[y] < 0 ||
		    p->values[z].birth < 0 || p->values[z].death == (int32_t)g->num_nodes ||
		    !same_tensor(&p->values[z].tensor, &p->values[y].tensor) || !dies_at(p, s, z, reach, words))
			continue;
		for (host = item_of[z]; items[host].host >= 0;)
			host = items[host].host;
		items[item_of[y]].host = host;
		if (items[item_of[y]].death > items[host].death)
			items[host].death = items[item_of[y]].death;
		for (uint32_t w = 0; reach != NULL && w < words; w++)
			items[host].after[w] &= items[item_of[y]].after[w];
		st->in_place_input = st->in_place_wanted;
		p->num_in_place++;
	}
}

int layout_arena(struct rt_plan *p, const int32_t *step_of, char *err, size_t cap)
{
	const struct rt_graph *g = p->graph;
	uint32_t count = 0, max = g->num_values + p->num_steps;
	struct arena_item *items = calloc(max + 1, sizeof(*items));
	struct arena_item **order = calloc(max + 1, sizeof(*order));
	struct arena_item **alive = calloc(max + 1, sizeof(*alive));
	int32_t *item_of = malloc(((size_t)g->num_values + 1) * sizeof(int32_t));
	uint32_t words = (p->num_steps + 63) / 64 + 1;
	uint64_t *after = NULL, *reach = NULL;
	size_t descriptors = 0;
	int rc = 0;

	if (p->layout == RT_PLAN_LAYOUT_CONCURRENT)
		reach = steps_reach(p, words);
	if (items == NULL || order == NULL || alive == NULL || item_of == NULL ||
	    (p->layout == RT_PLAN_LAYOUT_CONCURRENT && reach == NULL)) {
		rc = bw_err(err, cap, -ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t s = 0; s < p->num_steps; s++) {
		p->steps[s].desc_offset = descriptors;
		descriptors += ((size_t)p->steps[s].num_inputs + p->steps[s].num_outputs) * sizeof(struct rt_tensor);
		if (rt_align_up(p->steps[s].scratch_total) > p->worker_scratch_bytes)
			p->worker_scratch_bytes = rt_align_up(p->steps[s].scratch_total);
	}
	p->descriptor_bytes = rt_align_up(descriptors);

	for (uint32_t v = 0; v < g->num_values; v++) {
		const struct rt_plan_value *pv = &p->values[v];

		item_of[v] = -1;
		if (pv->placement != RT_PLACE_ARENA)
			continue;
		items[count] = (struct arena_item){ .size = rt_align_up(pv->nbytes), .birth = pv->birth,
						    .death = pv->death, .id = v, .host = -1 };
		item_of[v] = (int32_t)count;
		count++;
	}
	if (reach != NULL && concurrent_after(p, step_of, reach, words, item_of, items, count, &after) != 0) {
		rc = bw_err(err, cap, -ENOMEM, "out of memory");
		goto out;
	}
	merge_in_place(p, items, item_of, reach, words);
	for (uint32_t s = 0; s < p->num_steps && p->layout == RT_PLAN_LAYOUT_SEQUENTIAL; s++) {
		const struct rt_plan_step *st = &p->steps[s];

		if (st->scratch_total == 0)
			continue;
		items[count] = (struct arena_item){ .size = rt_align_up(st->scratch_total),
						    .birth = (int32_t)st->node_index, .death = (int32_t)st->node_index,
						    .id = g->num_values + s, .host = -1 };
		count++;
	}
	for (uint32_t i = 0; i < count; i++)
		p->tensor_bytes_sum += items[i].size;
	p->tensor_bytes = layout_items(items, count, order, alive, p->layout);
	p->arena_bytes = p->descriptor_bytes + p->tensor_bytes;
	if (p->arena_bytes == 0)
		p->arena_bytes = RT_PLAN_ALIGN; /* aligned_alloc(, 0) may fail; keep the arena a real one */

	for (uint32_t i = 0; i < count; i++) {
		size_t offset = p->descriptor_bytes + items[items[i].host >= 0 ? items[i].host : (int32_t)i].offset;

		if (items[i].id < g->num_values)
			p->values[items[i].id].offset = offset;
		else
			p->steps[items[i].id - g->num_values].scratch_offset = offset;
	}
out:
	free(reach);
	free(after);
	free(item_of);
	free(items);
	free(order);
	free(alive);
	return rc;
}
